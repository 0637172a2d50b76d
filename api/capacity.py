"""The capacity plan: memory, GPU memory and disk per pod of a job, from its spec and graph size.

Pure arithmetic, torch-free (the operator image has no torch): every figure re-derives the
layout the workload allocates, and each line names the code it mirrors. Steady figures are
what a process holds while it trains; ``transient`` figures are peaks on top of them while it
loads (the plan adds the largest one). Bytes per mini-batch and seeds/s live in
:mod:`distgnn_api.traffic`; checking a plan against the spec's resources in
:mod:`distgnn_api.capacity_check`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

from distgnn_api.core_types import ResourceRequirements
from distgnn_api.graph_size import INT32_MAX, GraphSize
from distgnn_api.kube import parse_quantity
from distgnn_api.partition_cost import PROCESS_BYTES, partition_cost
from distgnn_api.spec import Arch, DistGNNJobSpec, PartitionAlgorithm, ReplicateTopology

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
# runtime/batches.py LOOKAHEAD; worker-mode feature slots per peer are LOOKAHEAD + 2
# (trainer/pipelines.py), server-client slots concurrency + 1 (sampler/server.py).
LOOKAHEAD = 2
# Peers that can share a host (and so map each other's slots): at most the other GPUs of an
# 8-GPU node. Pods on other nodes get their rows over RPC and cost no slot.
MAX_PEERS_PER_HOST = 7

# Estimates, not layouts (to be calibrated: benchmarks/capacity/):
PROCESS_HOST_BYTES = 1 * GIB
"""Host memory of one workload process before it loads data: interpreter, torch, RPC agent."""
CUDA_CONTEXT_BYTES = 600 << 20
"""GPU memory of a CUDA context plus cuBLAS/NCCL workspaces, per process."""
ACTIVATION_COPIES = 4
"""Tensors of a layer's output size autograd keeps per layer (input, aggregate, output, grad)."""


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
class RolePlan:
    """What one pod of a role needs."""

    role: str
    pods: int
    processes_per_pod: int
    gpus_per_pod: int
    items: tuple[Item, ...]
    seconds: float | None = None
    """Wall time (the partition Job only)."""

    def _sum(self, where: Where) -> int:
        steady = sum(i.bytes for i in self.items if i.where == where and not i.transient)
        peak = max((i.bytes for i in self.items if i.where == where and i.transient), default=0)
        return steady + peak

    @property
    def host_bytes(self) -> int:
        """Peak host memory of one pod (every process of it)."""
        return self._sum("host") * self.processes_per_pod

    @property
    def gpu_bytes(self) -> int:
        """Peak memory of one GPU (one process per GPU)."""
        return self._sum("gpu")

    @property
    def disk_bytes(self) -> int:
        return self._sum("disk")


@dataclass(frozen=True)
class Shapes:
    """Sizes the roles share: one holder's share and one mini-batch's capacities."""

    holders: int
    owned_nodes: int
    owned_edges: int
    hop_caps: tuple[int, ...]
    feature_bytes: int
    """Bytes of one feature value on a holder: 2 with bf16 (holder.load), else 4."""
    replicate: bool
    replicate_why: str
    params: int

    @property
    def node_cap(self) -> int:
        """StaticLayout.node_cap: B + B f1 + B f1 f2 + ..."""
        return sum(self.hop_caps)


@dataclass
class Plan:
    """The capacity plan of one job."""

    graph: GraphSize
    shapes: Shapes
    roles: list[RolePlan]
    volume_bytes: int
    """The partition store and checkpoints on the shared volume."""
    notes: list[str] = field(default_factory=list)

    def role(self, name: str) -> RolePlan | None:
        return next((r for r in self.roles if r.role == name), None)


def hop_caps(batch_size: int, fanouts: list[int]) -> tuple[int, ...]:
    """sampling/static_hops.py StaticLayout.hop_caps: B, B f1, B f1 f2, ..."""
    caps = [batch_size]
    for k in fanouts:
        caps.append(caps[-1] * k)
    return tuple(caps)


def index_sizes(caps: tuple[int, ...]) -> int:
    """Elements of StaticLayout.index_sizes(): per layer src + dst (edge_cap) and ptr."""
    layers = len(caps) - 1
    total = 0
    for layer in range(layers):
        edges = sum(caps[1 : layers - layer + 1])
        total += 2 * edges + sum(caps[: layers - layer]) + 2
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


def shapes(
    spec: DistGNNJobSpec, graph: GraphSize, gpu_memory: int, host_free: int | None
) -> Shapes:
    """One holder's share, the batch capacities and whether the topology is replicated.

    ``host_free`` stands for a CPU holder's free memory (its memory limit), ``gpu_memory`` for
    a GPU holder's, in replicateTopology auto's test.
    """
    h = spec.num_holders
    metis = spec.partition.algorithm == PartitionAlgorithm.metis
    node_imb = METIS_NODE_IMBALANCE if metis else 1.0
    edge_imb = METIS_EDGE_IMBALANCE if metis else 1.0
    owned = min(graph.num_nodes, math.ceil(graph.num_nodes / h * node_imb))
    owned_edges = min(graph.num_edges, math.ceil(graph.num_edges / h * edge_imb))
    policy = spec.samplers.replicate_topology
    topo = topology_bytes(graph)
    holder_gpus = spec.trainers.gpus_per_pod if spec.worker_mode else spec.samplers.gpus_per_pod
    free = gpu_memory if holder_gpus > 0 else host_free
    if policy is not ReplicateTopology.auto:
        replicate = policy is ReplicateTopology.always
        why = f"replicateTopology {policy.value}"
    elif free is None:
        replicate, why = True, "auto: no memory limit on the holders, assumed to fit"
    else:
        replicate = topo <= REPLICATE_FITS_SHARE * free
        why = (
            f"auto: topology {topo / GIB:.2f} GiB {'<=' if replicate else '>'} half of "
            f"{free / GIB:.1f} GiB on the {'GPU' if holder_gpus else 'host'}"
        )
    return Shapes(
        holders=h,
        owned_nodes=owned,
        owned_edges=owned_edges,
        hop_caps=hop_caps(spec.training.batch_size, list(spec.model.fanout)),
        feature_bytes=2 if spec.training.bf16 else 4,
        replicate=replicate,
        replicate_why=why,
        params=num_params(spec, graph),
    )


def batch_bytes(s: Shapes, graph: GraphSize) -> int:
    """One mini-batch at its capacities (runtime/batches.py batch_slot_spec): int64 node ids,
    int32 edges, int64 target ptr, features, int64 labels."""
    caps = s.hop_caps
    return (
        s.node_cap * 8
        + 2 * sum(caps[1:]) * 4
        + (sum(caps[:-1]) + 1) * 8
        + s.node_cap * graph.num_features * s.feature_bytes
        + caps[0] * 8
    )


def holder_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A holder process (sampler, or trainer in worker mode): runtime/holder.py load/connect."""
    n, f, fb = graph.num_nodes, graph.num_features, s.feature_bytes
    own, remote = s.owned_nodes, graph.num_nodes - s.owned_nodes
    cached = round(spec.samplers.cache_ratio * remote)
    idx = graph.index_bytes
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
    if not table_complete and s.holders > 1 and all(k >= 1 for k in spec.model.fanout):
        count = LOOKAHEAD + 2 if spec.worker_mode else spec.samplers.concurrency + 1
        slot = s.node_cap * f * fb
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


def trainer_items(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> list[Item]:
    """A trainer process: model, optimizer, CUDA-graph inputs, activations, prefetched batches."""
    caps, layers = s.hop_caps, spec.model.num_layers
    ab = 2 if spec.training.bf16 else 4
    acts = 0
    for layer, (i, o) in enumerate(layer_widths(spec, graph)):
        targets = sum(caps[: layers - layer]) + 1
        edges = sum(caps[1 : layers - layer + 1])
        acts += ACTIVATION_COPIES * targets * o * ab + edges * 8 + targets * i * ab
    items = [
        Item("parameters, gradients, Adam moments (fp32)", 16 * s.params, dev,
             "trainer/loop.py torch.optim.Adam"),
        Item("activations (estimate)", acts, dev, f"{ACTIVATION_COPIES} x each layer's output"),
        Item(f"prefetched batches ({spec.trainers.prefetch})",
             spec.trainers.prefetch * batch_bytes(s, graph), dev, "trainers.prefetch, batch caps"),
    ]  # fmt: skip
    if dev == "gpu" and spec.model.arch == Arch.sage:
        static = (
            (s.node_cap + 1) * graph.num_features * s.feature_bytes
            + index_sizes(caps) * 8
            + caps[0] * 8
        )
        items.append(Item("CUDA-graph static inputs", static, dev,
                          "trainer/graph_step.py GraphStep x, index, y"))  # fmt: skip
    return items


def _process_items(dev: Where) -> list[Item]:
    items = [Item("process runtime (estimate)", PROCESS_HOST_BYTES, "host", "interpreter, torch")]
    if dev == "gpu":
        items.append(Item("CUDA context (estimate)", CUDA_CONTEXT_BYTES, "gpu", "per process"))
    return items


def _holder_device(spec: DistGNNJobSpec) -> Where:
    gpus = spec.trainers.gpus_per_pod if spec.worker_mode else spec.samplers.gpus_per_pod
    return "gpu" if gpus > 0 else "host"


def resource_bytes(res: ResourceRequirements, name: str) -> int | None:
    """A container's limit of ``name`` (else its request) in bytes; None when neither is set."""
    for values in (res.limits, res.requests):
        if name in values:
            q = parse_quantity(values[name])
            if q is not None:
                return int(q)
    return None


def _memory_limit(spec: DistGNNJobSpec) -> int | None:
    """The holder pods' memory limit (else request), for replicateTopology auto on CPU."""
    res = spec.trainers.resources if spec.worker_mode else spec.samplers.resources
    return resource_bytes(res, "memory")


def build_plan(
    spec: DistGNNJobSpec,
    graph: GraphSize,
    *,
    gpu_memory: int = 80 * GIB,
    host_memory: int | None = None,
) -> Plan:
    """The plan of ``spec`` on ``graph``: every role's pods, the partition Job, the volume.

    ``gpu_memory`` is the memory of one GPU; ``host_memory`` what a CPU holder may use (its
    memory limit by default; without one, replicateTopology auto is assumed to replicate).
    """
    s = shapes(spec, graph, gpu_memory, host_memory or _memory_limit(spec))
    cost = partition_cost(spec, graph)
    partition = RolePlan(
        role="partition",
        pods=1,
        processes_per_pod=1,
        gpus_per_pod=0,
        items=(
            Item("process runtime", PROCESS_BYTES, "host", "partition_cost.PROCESS_BYTES"),
            Item("graph (GraphData)", cost.graph_bytes, "host", "data/graph.py nbytes"),
            Item(f"METIS on {cost.metis_edges:,} edges", cost.metis_bytes, "host",
                 "partition/algorithms.py: ~85 B per edge", transient=True),
            Item("writer id maps", cost.writer_bytes, "host", "partition/writer.py _write_store",
                 transient=True),
            Item("partition store", cost.store_bytes, "disk", "partition/writer.py arrays"),
        ),
        seconds=cost.seconds,
    )  # fmt: skip
    roles = [partition]
    tdev: Where = "gpu" if spec.trainers.gpus_per_pod > 0 else "host"
    trainer_procs = spec.trainers.replicas * max(1, spec.trainers.gpus_per_pod)
    if not spec.worker_mode:
        sdev = _holder_device(spec)
        items = _process_items(sdev) + holder_items(spec, graph, s, sdev)
        if all(k >= 1 for k in spec.model.fanout):
            peers = min(trainer_procs, MAX_PEERS_PER_HOST + 1)
            count = spec.samplers.concurrency + 1
            items.append(Item(f"batch slots for {peers} trainer(s) on the host ({count} each)",
                              peers * count * batch_bytes(s, graph), sdev,
                              "sampler/server.py, runtime/batches.py batch_slot_spec"))  # fmt: skip
        roles.append(
            RolePlan("sampler", spec.samplers.replicas, 1, spec.samplers.gpus_per_pod, tuple(items))
        )
    titems = _process_items(tdev) + trainer_items(spec, graph, s, tdev)
    if spec.worker_mode:
        titems += holder_items(spec, graph, s, tdev)
    roles.append(
        RolePlan(
            "trainer",
            spec.trainers.replicas,
            max(1, spec.trainers.gpus_per_pod),
            spec.trainers.gpus_per_pod,
            tuple(titems),
        )
    )
    checkpoints = 2 * 12 * s.params  # params + two Adam moments, fp32; the last and the new one
    notes = [f"topology {'replicated' if s.replicate else 'partitioned'} ({s.replicate_why})"]
    if graph.approximate:
        notes.append(f"approximate: {graph.approximate}")
    return Plan(
        graph=graph,
        shapes=s,
        roles=roles,
        volume_bytes=cost.store_bytes + checkpoints,
        notes=notes,
    )
