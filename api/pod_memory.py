"""What one workload process holds, line by line: the layouts of the holder (its partitions,
feature table, cache, shared slots) and of the trainer (model, CUDA-graph inputs, batches).

Each :class:`Item` names the code it mirrors. Used by :mod:`distgnn_api.capacity`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

from distgnn_api.feature_memory import feature_budget, table_split
from distgnn_api.graph_size import INT32_MAX, GraphSize, distinct_draws
from distgnn_api.spec import Arch, DistGNNJobSpec

GIB = 1 << 30
Where = Literal["host", "gpu", "disk"]

# Balance the partitioner guarantees (workload/partition/algorithms.py TOLERANCE, enforced by
# partition/balance.py): the largest METIS partition holds at most 3% more nodes and 10% more
# edges than the mean. Random assignment deals nodes round-robin (within one node).
METIS_NODE_IMBALANCE = 1.03
METIS_EDGE_IMBALANCE = 1.10

# runtime/distributed_sampler.py FITS_SHARE: replicateTopology auto replicates the topology
# when it takes at most half of the device's free memory.
REPLICATE_FITS_SHARE = 0.5
# runtime/holder.py SLOT_MEMORY_SHARE: shared slots for one peer take at most 5% of the device.
SLOT_MEMORY_SHARE = 0.05
# runtime/batches.py LOOKAHEAD: a worker-mode trainer has up to LOOKAHEAD + 1 rounds of the
# feature exchange in flight; server-client feature slots per peer: concurrency + 1
# (sampler/server.py).
LOOKAHEAD = 2
# Peers that can share a host (and so map each other's slots): at most the other GPUs of an
# 8-GPU node. Pods on other nodes get their rows over RPC and cost no slot.
MAX_PEERS_PER_HOST = 7

# Estimates, not layouts (to be calibrated: benchmarks/capacity/):
SAMPLER_PROCESS_BYTES = 640 << 20
"""Peak RSS of a sampler process beside its data: interpreter, torch, RPC agent (measured on
CPU at 1/100 of products scale, benchmarks/capacity/results/runtime-cpu-0.01.json)."""
TRAINER_PROCESS_BYTES = 784 << 20
"""The same for a trainer process (gloo, autograd and the optimizer's workspaces too)."""
CUDA_CONTEXT_BYTES = 600 << 20
"""GPU memory of a CUDA context plus cuBLAS/NCCL workspaces, per process."""
CUDA_HOST_BYTES = 1 << 30
"""Host RSS a process gains once it uses CUDA: the driver's mappings, torch's CUDA kernel
images (cuBLAS, cuDNN, NCCL pages touched) and pinned staging (measured on 1 x H200, torch
2.11, benchmarks/capacity/results/gpu-h200-1.jsonl: +1.0 to 1.4 GB per CUDA process)."""
ACTIVATION_COPIES = 4
"""Tensors of a layer's output size autograd keeps per layer (input, aggregate, output, grad)."""
ROW_ITEMS = ("owned feature rows", "hot cache", "cache reserve", "hotness pre-sampling")
"""How a holder's items of its feature rows begin: a tiered or typed table replaces them."""


@dataclass(frozen=True)
class Item:
    """One line of a pod's budget: bytes per process (``per_pod`` False) or per pod."""

    what: str
    bytes: int
    where: Where
    source: str
    """The code (or measurement) the figure comes from."""
    transient: bool = False


@dataclass(frozen=True)
class Shapes:
    """Sizes the roles share: one holder's share and one mini-batch's capacities."""

    holders: int
    owned_nodes: int
    owned_edges: int
    hop_caps: tuple[int, ...]
    """Most nodes per hop of one mini-batch (:func:`hop_caps`, at most the graph's nodes)."""
    edge_caps: tuple[int, ...]
    """Most sampled edges per hop (:func:`edge_caps`)."""
    feature_bytes: int
    """Bytes of one feature value on a holder: 2 with bf16 (holder.load), else 4."""
    replicate: bool
    replicate_why: str
    params: int
    expected_nodes: tuple[float, ...]
    """Expected new distinct nodes per hop of one mini-batch (:func:`expected_hops`)."""
    expected_edges: tuple[float, ...]
    gpu_memory: int = 80 * GIB
    """Memory of one GPU (featureMemory auto takes its share of it)."""

    @property
    def node_cap(self) -> int:
        """StaticLayout.node_cap: B + B f1 + B f1 f2 + ..."""
        return sum(self.hop_caps)


def hop_caps(batch_size: int, fanouts: list[int], num_nodes: int | None = None) -> tuple[int, ...]:
    """sampling/static_hops.py StaticLayout.hop_caps: B, B f1, B f1 f2, ...; with
    ``num_nodes``, each at most the graph's nodes (a mini-batch holds each node once, so no
    hop adds more distinct nodes than the graph has)."""
    caps = [batch_size]
    for k in fanouts:
        caps.append(caps[-1] * k)
    return tuple(caps if num_nodes is None else (min(c, num_nodes) for c in caps))


def edge_caps(
    node_caps: tuple[int, ...], fanouts: list[int], num_edges: int | None = None
) -> tuple[int, ...]:
    """Most sampled edges per hop: every node of the previous hop draws at most its fanout
    (B f1, B f1 f2, ... while no cap applies), and, with ``num_edges``, no hop draws more
    edges than the graph stores (fanouts draw without replacement)."""
    caps = (prev * k for prev, k in zip(node_caps, fanouts, strict=False))
    return tuple(caps if num_edges is None else (min(c, num_edges) for c in caps))


def index_sizes(node_caps: tuple[int, ...], edge_caps: tuple[int, ...]) -> int:
    """Elements of StaticLayout.index_sizes(): per layer src + dst (edge_cap) and ptr."""
    layers = len(edge_caps)
    total = 0
    for layer in range(layers):
        edges = sum(edge_caps[: layers - layer])
        total += 2 * edges + sum(node_caps[: layers - layer]) + 2
    return total


def layer_widths(spec: DistGNNJobSpec, graph: GraphSize) -> list[tuple[int, int]]:
    """(in, out) of each layer: features -> hidden -> ... -> classes."""
    hidden, layers = spec.model.hidden_channels, spec.model.num_layers
    dims = [graph.num_features] + [hidden] * (layers - 1) + [graph.num_classes]
    return list(itertools.pairwise(dims))


def num_params(spec: DistGNNJobSpec, graph: GraphSize) -> int:
    """Trainable parameters: SAGELayer (models/sage.py) has lin_l (W + bias) and lin_r (W);
    PyG's GCNConv W + bias; GATConv W + att_src + att_dst + bias."""
    total = 0
    for i, o in layer_widths(spec, graph):
        if spec.model.arch == Arch.gcn:
            total += i * o + o
        elif spec.model.arch == Arch.gat:
            total += i * o + 3 * o
        else:
            total += 2 * i * o + o
    return total


def topology_bytes(graph: GraphSize) -> int:
    """The replicated CSR (distributed_sampler.replicated_factory): int64 indptr, int32 ids."""
    idx = 4 if graph.num_nodes <= INT32_MAX else 8
    return (graph.num_nodes + 1) * 8 + graph.num_edges * idx


def expected_hops(
    graph: GraphSize, batch_size: int, fanouts: list[int]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Expected (new distinct nodes per hop, sampled edges per hop) of one mini-batch.

    Each hop samples min(fanout, mean degree) neighbours of every frontier node; distinct
    nodes are draws with replacement among N: ``N (1 - exp(-draws/N))`` in all, cumulatively.
    """
    n = graph.num_nodes
    degree = graph.num_edges / n
    frontier, draws = float(batch_size), float(batch_size)
    edges: list[float] = []
    distinct = [float(batch_size)]
    for f in fanouts:
        frontier *= min(float(f), degree)
        edges.append(frontier)
        draws += frontier
        distinct.append(max(distinct[-1], distinct_draws(draws, n)))
    nodes = [distinct[0]] + [b - a for a, b in itertools.pairwise(distinct)]
    return tuple(nodes), tuple(edges)


def hop_sizes(s: Shapes, dev: Where) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Nodes and edges per hop a buffer on ``dev`` holds: GPU buffers are allocated at the
    layout's capacities (static shapes, CUDA graphs, slots); host pages count only once
    touched, so host memory follows the expected batch."""
    if dev == "gpu":
        return tuple(float(c) for c in s.hop_caps), tuple(float(c) for c in s.edge_caps)
    return s.expected_nodes, s.expected_edges


def batch_bytes(s: Shapes, graph: GraphSize, dev: Where = "gpu") -> int:
    """One mini-batch (runtime/batches.py batch_slot_spec): int64 node ids, int32 edges, int64
    target ptr, features, int64 labels; at capacity on a GPU, as expected on the host."""
    nodes, edges = hop_sizes(s, dev)
    return round(
        sum(nodes) * 8
        + 2 * sum(edges) * 4
        + (sum(nodes[:-1]) + 1) * 8
        + sum(nodes) * graph.num_features * s.feature_bytes
        + s.hop_caps[0] * 8
    )


def feature_table_split(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where
) -> tuple[int, int, int] | None:
    """(GPU bytes, pinned host bytes, table bytes) of one holder's feature table under
    ``samplers.featureMemory`` (runtime/holder.py device_feature_budget), None without one."""
    value = spec.samplers.feature_memory
    if value is None or (dev != "gpu" and value == "auto"):
        return None
    remote = graph.num_nodes - s.owned_nodes
    rows = s.owned_nodes + round(spec.samplers.cache_ratio * remote)
    row = graph.num_features * s.feature_bytes
    other = topology_bytes(graph) if s.replicate and dev == "gpu" else 0
    free = s.gpu_memory - CUDA_CONTEXT_BYTES
    gpu, host = table_split(feature_budget(value, free, s.gpu_memory, other), rows, row)
    return gpu, host, rows * row


def holder_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A holder process (sampler, or trainer in worker mode): runtime/holder.py load/connect."""
    n, f, fb = graph.num_nodes, graph.num_features, s.feature_bytes
    own, remote = s.owned_nodes, graph.num_nodes - s.owned_nodes
    cached = round(spec.samplers.cache_ratio * remote)
    idx = graph.index_bytes
    split = feature_table_split(spec, graph, s, dev)
    if split is not None and split[1]:
        return _tiered_holder_items(spec, graph, s, dev, split)
    items = [
        Item("owned feature rows", own * f * fb, dev, "features/layout.py load_holder"),
        Item("load staging (float32 copy + cat)", 2 * own * f * 4, "host",
             "features/layout.py load_holder: np.array copy, torch.cat", transient=True),
        Item("feature slot map (int32 per node)", n * 4, dev, "features/table.py FeatureTable.slot"),
        Item("labels (int64 per node)", n * 8, dev, "features/layout.py load_labels"),
        Item("owned CSR (int64 indptr, ids)", (own + 1) * 8 + s.owned_edges * idx, "host",
             "features/layout.py HolderData.indptr/indices"),
        Item("split ids (int64)", own * 8, "host", "features/layout.py load_holder ids()"),
    ]  # fmt: skip
    if cached:
        items.append(
            Item(
                f"hot cache ({spec.samplers.cache_ratio:g} of remote rows)",
                cached * f * fb,
                dev,
                "holder.connect budget, features/table.py reserve",
            )
        )
        items.append(
            Item(
                "cache reserve (torch.cat of the table)",
                (own + cached) * f * fb,
                dev,
                "features/table.py FeatureTable.reserve",
                transient=True,
            )
        )
        if cached < remote:
            items.append(
                Item(
                    "hotness pre-sampling (counts, scores, degrees)",
                    n * 25,
                    "host",
                    "features/cache_policy.py presample_counts, select_hot",
                    transient=True,
                )
            )
    if s.replicate:
        topo = topology_bytes(graph)
        items.append(
            Item(
                "replicated topology",
                topo,
                dev,
                "runtime/distributed_sampler.py replicated_factory",
            )
        )
        if dev == "gpu":
            items.append(
                Item(
                    "topology staging (host copy)",
                    topo,
                    "host",
                    "replicated_factory np.array copy",
                    transient=True,
                )
            )
    table_complete = cached >= remote
    if not table_complete and s.holders > 1 and spec.worker_mode:
        # the rounds in flight, each with the rows it receives and the rows it serves
        rounds = LOOKAHEAD + 1
        touched = round(sum(hop_sizes(s, dev)[0])) * f * fb
        items.append(
            Item(
                f"feature exchange buffers ({rounds} rounds, rows in and out)",
                rounds * 2 * touched,
                dev,
                "runtime/features/exchange.py FeatureExchange.round",
            )
        )
    elif not table_complete and s.holders > 1 and all(k >= 1 for k in spec.model.fanout):
        count = spec.samplers.concurrency + 1
        slot = round(sum(hop_sizes(s, dev)[0])) * f * fb
        peers = min(s.holders - 1, MAX_PEERS_PER_HOST)
        items.append(
            Item(
                f"feature slots for {peers} peer(s) on the host ({count} each)",
                peers * count * slot,
                dev,
                "holder.attach_feature_slots, shared_slots.SlotOwner",
            )
        )
    return items  # fmt: skip


def _tiered_holder_items(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where, split: tuple[int, int, int]
) -> list[Item]:
    """A holder whose feature table is over its GPU budget: every row in pinned host memory,
    the hottest up to the budget on the GPU too; the rest as an untiered holder's."""
    gpu, host, _ = split
    untiered = spec.model_copy(
        update={"samplers": spec.samplers.model_copy(update={"feature_memory": None})}
    )
    items = [i for i in holder_items(untiered, graph, s, dev) if not i.what.startswith(ROW_ITEMS)]
    return [
        Item("feature table, GPU tier (hottest rows, featureMemory)", gpu, dev,
             "features/table.py FeatureTable.place"),
        Item("feature table, pinned host tier (every row, 128-byte aligned)", host, "host",
             "features/tiers.py host_tier"),
        Item("presampling for placement (counts, scores)", graph.num_nodes * 25, "host",
             "features/cache_policy.py presample_counts", transient=True),
        *items,
    ]  # fmt: skip


def trainer_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A trainer process: model, optimizer, CUDA-graph inputs, activations, prefetched batches."""
    graph_step = dev == "gpu" and spec.model.arch == Arch.sage
    acts = activation_bytes(spec, graph, s, dev)
    items = [
        Item("parameters, gradients, Adam moments (fp32)", 16 * s.params, dev,
             "trainer/loop.py torch.optim.Adam"),
        Item("activations (estimate)", acts, dev,
             f"{ACTIVATION_COPIES} x each layer's output"),
        Item(f"prefetched batches ({spec.trainers.prefetch} + 2 in use)",
             (spec.trainers.prefetch + 2) * batch_bytes(s, graph, dev), dev,
             "trainers.prefetch, the batch in the step and the one being produced "
             "(loader/batch_loader.py Prefetcher)"),
    ]  # fmt: skip
    if dev == "gpu" and spec.model.arch == Arch.sage:
        static = (
            (s.node_cap + 1) * graph.num_features * s.feature_bytes
            + index_sizes(s.hop_caps, s.edge_caps) * 8
            + s.hop_caps[0] * 8
        )
        items.append(Item("CUDA-graph static inputs", static, dev,
                          "trainer/graph_step.py GraphStep x, index, y"))  # fmt: skip
    if graph_step:
        # each batch in flight also holds its fixed-shape index (pad_hops, on the prefetch
        # stream) and its edges widened to int64 (the slot and the wire carry int32)
        padded = index_sizes(s.hop_caps, s.edge_caps) * 8 + 2 * sum(s.edge_caps) * 4
        items.append(Item(f"prefetched batches' fixed-shape index and int64 edges "
                          f"({spec.trainers.prefetch} + 2)",
                          (spec.trainers.prefetch + 2) * padded, dev,
                          "sampling/static_hops.py pad_hops, runtime/batches.py "
                          "unpack_from .to(torch.int64)"))  # fmt: skip
        # the warm-up steps run eagerly (their blocks stay in the allocator's cache), then
        # the capture allocates the step's activations and gradients again in its own pool
        items.append(Item("CUDA-graph private pool (the captured step's activations)", acts,
                          dev, "trainer/graph_step.py WARMUP_STEPS, torch.cuda.graph"))  # fmt: skip
    return items


def activation_bytes(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> int:
    """What autograd keeps for one training step (an estimate: ACTIVATION_COPIES)."""
    layers = spec.model.num_layers
    ab = 2 if spec.training.bf16 else 4
    # CUDA-graph steps (GraphSAGE on a GPU) run at the capacities; eager steps at the batch's
    graph_step = dev == "gpu" and spec.model.arch == Arch.sage
    nodes, hop_edges = hop_sizes(s, "gpu" if graph_step else "host")
    acts = 0.0
    for layer, (i, o) in enumerate(layer_widths(spec, graph)):
        targets = sum(nodes[: layers - layer]) + 1
        edges = sum(hop_edges[: layers - layer])
        acts += ACTIVATION_COPIES * targets * o * ab + edges * 8 + targets * i * ab
    return round(acts)


def process_items(dev: Where, role: str) -> list[Item]:
    base = TRAINER_PROCESS_BYTES if role == "trainer" else SAMPLER_PROCESS_BYTES
    items = [Item("process runtime", base, "host", "measured: interpreter, torch, RPC")]
    if dev == "gpu":
        items.append(Item("CUDA context (estimate)", CUDA_CONTEXT_BYTES, "gpu", "per process"))
        items.append(Item("CUDA runtime on the host (driver maps, kernel images, pinned)",
                          CUDA_HOST_BYTES, "host", "measured: gpu-h200-1.jsonl"))  # fmt: skip
    return items
