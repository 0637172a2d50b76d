"""A typed graph's trainer and samplers, per node type and relation: the relational model's
parameters, its activations and embedding lookups, the prefetched typed mini-batches, the
fixed-shape (CUDA-graph) step's inputs, and the typed samplers' buffers.

The shapes (:mod:`distgnn_api.typed_shapes`) follow the workload's code:

- :func:`bounds` is ``sampling/static_sample.py`` ``StaticCaps.bounds``: per node type the
  node bound of each hop, per relation the edge bound of each hop;
- :func:`expected_batch` extends :func:`~distgnn_api.pod_memory.expected_hops` to relations:
  every node of type ``d`` new at hop ``h`` (the sampler's frontier) draws
  ``min(fanout, mean degree)`` neighbours along each relation ``(s, r, d)``, and the
  distinct nodes of type ``s`` are draws with replacement among its ``num_nodes[s]``;
- :func:`fitted` is ``StaticCaps.fitted`` with the expected batch as the batches seen: a
  worker-mode GPU trainer fits its sampler's caps, and so its step's, to its first sampled
  batches (``trainer/loop.py`` ``HeteroTrainer._fit_caps``); a sampler server keeps the
  bounds, and so does the step of a trainer it serves;
- :class:`TypedLayers` is ``models/relational.py`` ``LayerPlan``: layer ``l`` of ``L``
  computes the nodes of hops ``0..L-l-1`` and aggregates over the relations into them.

GPU buffers of fixed shape are allocated at the caps; the prefetched batches are cut to their
real sizes, so they follow the expected batch, as every host buffer does. Used by
:mod:`distgnn_api.capacity` for a graph whose relations are known
(:attr:`GraphSize.relations <distgnn_api.graph_size.GraphSize.relations>`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from distgnn_api.edge_types import EdgeType
from distgnn_api.gpu_sampler_memory import sampler_count
from distgnn_api.graph_size import GraphSize
from distgnn_api.pod_memory import ACTIVATION_COPIES, GIB, LOOKAHEAD, Item, Shapes, Where
from distgnn_api.spec import DistGNNJobSpec
from distgnn_api.typed_shapes import (
    FIT_HEADROOM,
    FIT_ROUND,
    FIT_SLACK,
    TypedHops,
    TypedLayers,
    bounds,
    expected_batch,
    fit_cap,
    fitted,
    relation_fanouts,
    target_type,
    typed_layers,
)

PREFETCH_DEPTH = 2
"""runtime/batches.py PREFETCH_DEPTH: typed batches a worker-mode trainer samples ahead."""
DUMP_BAG = 32
"""sampling/static_hops.py DUMP_BAG: most padding edges per dump bag of a layer's mean."""
GRAPH_MEMORY_SHARE = 0.1
"""trainer/step_policy.py: the fixed-shape inputs of a captured step take at most this share
of the GPU, else the typed steps stay eager."""
HOP_DRAW_TEMPS = 12
"""int64 tensors per draw of a hop that sampling/static_run.py StaticRun.hop holds at once:
the positions drawn, each relation's neighbours and CSR positions, their concatenation, the
ids shifted by their type's offset and its gather, the running counts of new nodes and of
kept edges, the local ids, the node and edge slots and the sources' local ids."""
ADAM_ROW_TEMPS = 4
"""fp32 tensors of the touched rows embeddings/optim.py RowSparseAdam._update holds at once
(old_avg, avg_update, old_sq, sq_update), besides their summed gradients."""


@dataclass(frozen=True)
class TypedStep:
    """A typed trainer's shapes: its layers and fanouts, the expected batch, and the caps
    of its fixed-shape step (fitted, or the bounds) where it runs one."""

    layers: TypedLayers
    fanouts: dict[EdgeType, list[int]]
    seed_type: str
    expected: TypedHops
    bounds: TypedHops
    caps: TypedHops
    fitted: bool
    """The caps are fitted to sampled batches (a worker-mode GPU trainer), not the bounds."""
    graph_step: bool
    """The steps run fixed-shape, captured in a CUDA graph."""
    world: int
    """Training processes: the embedding lookups' blocks, one per rank."""


def step_input_bytes(layers: TypedLayers, caps: TypedHops, element: int) -> float:
    """What trainer/graph_step.py typed_caps weighs against the GPU: each input type's rows
    at its node cap, and every relation's int64 edges and target offsets."""
    inputs = sum(caps.node_cap(t) * w * element for t, w in layers.widths[0].items())
    index = 8 * sum(2 * sum(e) + caps.target_cap(et[2]) for et, e in caps.edges.items())
    return inputs + index


def typed_step(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> TypedStep:
    """The typed trainer of ``spec`` on ``graph`` in a process on ``dev``."""
    fanouts = relation_fanouts(spec, graph)
    seed, batch = target_type(spec, graph), spec.training.batch_size
    layers = typed_layers(spec, graph)
    expected = expected_batch(graph, fanouts, seed, batch)
    bound = bounds(graph, fanouts, seed, batch)
    fit = dev == "gpu" and spec.worker_mode
    caps = fitted(bound, expected, fanouts) if fit else bound
    room = GRAPH_MEMORY_SHARE * s.gpu_memory
    graph_step = dev == "gpu" and step_input_bytes(layers, caps, s.feature_bytes) <= room
    world = spec.trainers.replicas * max(1, spec.trainers.gpus_per_pod)
    return TypedStep(layers, fanouts, seed, expected, bound, caps, fit, graph_step, world)


def activation_bytes(spec: DistGNNJobSpec, st: TypedStep, sizes: TypedHops) -> dict[str, int]:
    """What one step's forward keeps, per destination type (an estimate): per layer the
    ACTIVATION_COPIES of its output rows, and per relation into the type the mean of the
    neighbours' inputs (models/aggregation.py, one row per bag: in a fixed-shape step the
    computed rows and the dump bags) and its int64 sources, targets and offsets."""
    ab = 2 if spec.training.bf16 else 4
    acts: dict[str, float] = {}
    for layer, (widths, out) in enumerate(zip(st.layers.widths, st.layers.outs, strict=True)):
        for t in st.layers.dst_types[layer]:
            acts[t] = acts.get(t, 0.0) + ACTIVATION_COPIES * sizes.dst_rows(layer, t) * out * ab
        for et in st.layers.edge_types[layer]:
            src, _, dst = et
            edges = sizes.layer_edges(layer, et)
            dumps = max(1, math.ceil(edges / DUMP_BAG)) if st.graph_step else 0
            bags = sizes.dst_rows(layer, dst) + dumps
            acts[dst] += bags * widths[src] * ab + 2 * edges * 8 + (bags + 1) * 8
    return {t: round(v) for t, v in acts.items()}


def embedding_block(st: TypedStep, node_type: str) -> float:
    """The slots of the block each rank of a fixed-shape step sends each owner of
    ``node_type``'s embeddings (ShardedEmbedding.lookup_padded): in a worker-mode GPU
    trainer fitted like a cap to the ids per owner of its first batches
    (trainer/loop.py _owner_peaks; here the expected batch's nodes of that type spread
    evenly over the ranks), at most the type's node cap; else the node cap."""
    cap = st.caps.node_cap(node_type)
    if not st.fitted:
        return cap
    return fit_cap(sum(st.expected.nodes[node_type]) / max(st.world, 1), cap)


def embedding_step_bytes(
    spec: DistGNNJobSpec, st: TypedStep, rows: float, block: float
) -> tuple[int, int]:
    """One step's ``(lookup, update)`` bytes for ``rows`` embedding rows of a featureless
    type (embeddings/table.py, optim.py). The lookup lives through the forward and the
    backward: the rows gathered, the step's input and their fp32 gradient. The update
    comes after the backward: the touched rows' summed fp32 gradients and RowSparseAdam's
    temporaries. A fixed-shape step with several ranks exchanges fixed blocks of ``block``
    slots per rank (:func:`embedding_block`), each way (ShardedEmbedding.lookup_padded,
    routes.py touched_of), and updates every slot it receives."""
    dim, ab = spec.model.embedding_size, 2 if spec.training.bf16 else 4
    blocks = st.graph_step and st.world > 1
    slots = st.world * block if blocks else rows
    lookup = rows * dim * (2 * ab + 4) + (2 * slots * (dim * ab + 8) if blocks else 0)
    update = (1 + ADAM_ROW_TEMPS) * slots * dim * 4 + (2 * slots * dim * ab if blocks else 0)
    return round(lookup), round(update)


def batch_bytes(graph: GraphSize, sizes: TypedHops, feature_bytes: int, batch_size: int) -> int:
    """One typed mini-batch (loader HeteroMiniBatch: sampling/hop_batch.py HeteroHopBatch):
    per type its int64 node ids and, where featured, its rows; per relation its int64 edges
    and target offsets; the seeds' int64 labels."""
    width = {t.name: t.num_features for t in graph.node_types}
    total = float(batch_size * 8)
    for t, per_hop in sizes.nodes.items():
        total += sum(per_hop) * (8 + width[t] * feature_bytes)
    for et, per_hop in sizes.edges.items():
        total += 2 * sum(per_hop) * 8 + (sizes.target_cap(et[2]) + 1) * 8
    return round(total)


def _rows(n: float) -> str:
    return f"{round(n):,}"


def typed_trainer_items(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where
) -> list[Item]:
    """A typed trainer process: the relational model and its optimizer, the step's
    activations per destination type and embedding lookups per featureless type, the
    prefetched typed batches and, in a fixed-shape step, its inputs and CUDA-graph pool."""
    st = typed_step(spec, graph, s, dev)
    sizes = st.caps if st.graph_step else st.expected
    at = "at the step's caps" if st.graph_step else "as expected"
    relations = sum(len(e) for e in st.layers.edge_types)
    items = [
        Item(f"parameters, gradients, Adam moments (fp32; {spec.model.arch.value}, "
             f"{relations} relation convs over {len(st.layers.outs)} layers)", 16 * s.params,
             dev, "models/rsage.py, models/rgcn.py; trainer/loop.py torch.optim.Adam"),
    ]  # fmt: skip
    acts = activation_bytes(spec, st, sizes)
    for t, b in acts.items():
        into = sum(et[2] == t for ets in st.layers.edge_types for et in ets)
        items.append(Item(f"activations of {t} (estimate: {_rows(sizes.target_cap(t))} rows "
                          f"{at}, {into} relation means)", b, dev,
                          f"models/relational.py _layers: {ACTIVATION_COPIES} x each "
                          "output, each relation's mean and edges"))  # fmt: skip
    embedded = [t.name for t in graph.featureless_types if t.name in st.layers.input_types]
    lookups, updates = {}, {}
    for t in embedded:
        block = embedding_block(st, t)
        lookups[t], updates[t] = embedding_step_bytes(spec, st, sizes.node_cap(t), block)
        ranks = f", blocks of {_rows(block)} per rank" if st.graph_step and st.world > 1 else ""
        items.append(Item(f"embedding lookups of {t} ({_rows(sizes.node_cap(t))} rows {at}"
                          f"{ranks}, their gradients)", lookups[t], dev,
                          "embeddings/table.py lookup_padded, routes.py LookupRows"))  # fmt: skip
    # the updates run once the backward has freed the activations, in their blocks
    live = sum(acts.values()) + sum(lookups.values())
    step = max(live, sum(updates.values()))
    if embedded:
        items.append(Item(f"row-sparse Adam of {len(embedded)} embedding table(s), beyond the "
                          "blocks the backward frees", step - live, dev,
                          "embeddings/routes.py touched_of, optim.py RowSparseAdam"))  # fmt: skip
    depth = PREFETCH_DEPTH if spec.worker_mode else max(1, spec.trainers.prefetch)
    # rows over the feature exchange: LOOKAHEAD more batches sampled, their rounds started
    exchanged = spec.worker_mode and s.holders > 1 and spec.samplers.cache_ratio < 1
    ahead = LOOKAHEAD if exchanged else 0
    one = batch_bytes(graph, st.expected, s.feature_bytes, spec.training.batch_size)
    over = f", {ahead} sampled ahead over the feature exchange" if ahead else ""
    items.append(Item(f"prefetched typed batches ({depth} + 2 in use{over}, as expected)",
                      (depth + 2 + ahead) * one, dev,
                      "runtime/batches.py HeteroPipeline (PREFETCH_DEPTH, LOOKAHEAD), "
                      "remote_batches.py TypedRemotePipeline"))  # fmt: skip
    if st.graph_step:
        items += _step_inputs(spec, graph, st, s.feature_bytes)
        # the warm-up steps run eagerly (their blocks stay in the allocator's cache), then
        # the capture allocates the step's activations, lookups and updates in its own pool
        items.append(Item("CUDA-graph private pool (the captured step's activations, lookups "
                          "and updates)", step, dev,
                          "trainer/captured_step.py WARMUP_STEPS, torch.cuda.graph"))  # fmt: skip
    return items


def _step_inputs(
    spec: DistGNNJobSpec, graph: GraphSize, st: TypedStep, feature_bytes: int
) -> list[Item]:
    """HeteroGraphStep's fixed inputs: per input type its features (or its embedding ids)
    at its node cap, per relation its edges and offsets (HeteroStaticHops), the labels."""
    caps, width = st.caps, {t.name: t.num_features for t in graph.node_types}
    items = []
    for t in st.layers.input_types:
        rows = caps.node_cap(t)
        if width[t]:
            items.append(Item(f"fixed-shape features of {t} ({_rows(rows)} rows x {width[t]})",
                              round(rows * width[t] * feature_bytes), "gpu",
                              "trainer/graph_step.py HeteroGraphStep.x"))  # fmt: skip
        else:
            items.append(Item(f"fixed-shape embedding ids of {t} ({_rows(rows)}, int64)",
                              round(rows * 8), "gpu",
                              "trainer/graph_step.py HeteroGraphStep.ids"))  # fmt: skip
    edges = [2 * sum(e) for e in caps.edges.values()]
    ptrs = [caps.target_cap(et[2]) + 1 for et in caps.edges]
    longest = max([2.0] + [e / 2 + 1 for e in edges] + [p + 1 for p in ptrs])
    labels = 2 * spec.training.batch_size
    index = 8 * (sum(edges) + sum(ptrs) + longest + labels)
    kind = "fitted" if st.fitted else "bound"
    items.append(Item(f"fixed-shape edges of {len(edges)} relations ({_rows(caps.edge_slots)} "
                      f"at the {kind} caps: src, dst, offsets) and labels", round(index), "gpu",
                      "sampling/static_hops.py HeteroStaticHops"))  # fmt: skip
    return items


def static_sample_bytes(caps: TypedHops, fanouts: Mapping[EdgeType, list[int]]) -> tuple[int, int]:
    """One typed static sampling (sampling/static_sample.py sample_static, static_run.py
    StaticRun): ``(blocks, consts)``. Its blocks: the int64 outputs at ``caps`` (node ids,
    sources, targets, offsets; one buffer each) and its largest hop's temporaries, every
    relation's draws at once (HOP_DRAW_TEMPS int64 and 3 bool a draw) and the duplicate test
    of its largest fanout group (uniform_subset.py: k bytes a draw). Its consts: each hop's
    index tensors, made once and kept (hop_layout.py hop_consts: int64 relation and row of
    every draw and of every target row)."""
    outputs = sum(caps.node_cap(t) + 1 for t in caps.nodes)
    outputs += sum(2 * (sum(e) + 1) + caps.target_cap(et[2]) + 2 for et, e in caps.edges.items())
    temps, consts = 0.0, 0.0
    for h in range(caps.num_layers):
        draws: dict[int, float] = {}
        rows = 0.0
        for et in caps.edges:
            k, targets = fanouts[et][h], caps.nodes[et[2]][h]
            rows += targets
            if k > 0 and targets > 0:
                draws[k] = draws.get(k, 0.0) + targets * k
        entries = sum(draws.values())
        consts += 16 * (entries + rows)
        if draws:
            largest = max(k * n for k, n in draws.items())
            temps = max(temps, entries * (8 * HOP_DRAW_TEMPS + 3) + largest)
    return round(8 * (outputs + 4) + temps), round(consts)


def typed_sampler_items(
    spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where
) -> list[Item]:
    """A holder's typed GPU samplers (HeteroNeighborSampler over its whole typed topology,
    runtime/training_data.py): each one's per-node tables and its static sampling at the
    caps (fitted in a worker-mode trainer, the bounds in a sampler server); in a server,
    the featured rows each concurrent request gathers. None on a CPU."""
    if dev != "gpu":
        return []
    count = sampler_count(spec)
    st = typed_step(spec, graph, s, dev)
    nodes = {t.name: t.num_nodes for t in graph.node_types}
    # the global-to-local tables (one buffer, int32 on CUDA: relabel.RelabelTables) and
    # each relation's indptr with its padding node (TypedCSR.build torch.cat, int64)
    tables = sum((n + 1) * 4 for n in nodes.values())
    tables += sum((nodes[r.dst] + 2) * 8 for r in graph.relations)
    blocks, consts = static_sample_bytes(st.caps, st.fanouts)
    kind = "fitted" if st.fitted else "bound"
    items = [
        Item(f"{count} typed sampler(s): id tables, indptr copy per relation, hop layouts",
             count * (tables + consts), dev, "sampling/relabel.py RelabelTables, csr.py "
             "TypedCSR.build, hop_layout.py hop_consts"),
        Item(f"{count} typed sampler(s): static sampling at the {kind} caps, warm-up blocks "
             "and CUDA-graph pool", count * 2 * blocks, dev,
             "static_run.py StaticRun, graph_capture.py capture"),
    ]  # fmt: skip
    if not spec.worker_mode:
        expected = st.expected
        rows = sum(
            expected.node_cap(t.name) * t.num_features * s.feature_bytes
            for t in graph.featured_types
        )
        items.append(Item(f"gathered feature rows of {count} concurrent request(s), one per "
                          "stream", round(count * rows), dev,
                          "sampler/server.py features.gather"))  # fmt: skip
    return items


def typed_step_note(spec: DistGNNJobSpec, graph: GraphSize, s: Shapes, dev: Where) -> str:
    """The plan's note on a typed trainer: its expected batch, and how its steps run."""
    st = typed_step(spec, graph, s, dev)
    e = st.expected
    per_type = ", ".join(f"{t} {_rows(e.node_cap(t))}" for t in e.nodes if e.node_cap(t))
    note = (
        f"typed batch of {spec.training.batch_size:,} {st.seed_type} seeds, as expected: "
        f"{per_type} nodes, {_rows(e.edge_slots)} edges over {len(e.edges)} relations"
    )
    slots = f"{_rows(st.caps.node_slots)} node and {_rows(st.caps.edge_slots)} edge slots"
    if st.graph_step and st.fitted:
        return (
            f"{note}; steps fixed-shape (CUDA graph) at caps fitted to it (x{FIT_HEADROOM:g} "
            f"+ {FIT_SLACK}, rounded to {FIT_ROUND}): {slots} (the bounds: "
            f"{_rows(st.bounds.node_slots)} and {_rows(st.bounds.edge_slots)})"
        )
    if st.graph_step:
        return f"{note}; steps fixed-shape (CUDA graph) at the bounds: {slots}"
    if dev == "gpu":
        need = step_input_bytes(st.layers, st.caps, s.feature_bytes) / GIB
        return (
            f"{note}; steps eager: fixed-shape inputs would take {need:.1f} GiB, over "
            f"{GRAPH_MEMORY_SHARE:g} of the card"
        )
    return f"{note}; steps eager (on the CPU)"
