"""A typed graph's mini-batch shapes, per node type and relation, as the workload's typed
sampler and relational models have them: the bounds and the caps fitted to sampled batches
(``sampling/static_sample.py`` ``StaticCaps``), the expected batch, each layer's
destination types and relations (``models/relational.py`` ``LayerPlan``) and the model's
parameters. :mod:`distgnn_api.typed_batches` sizes a trainer's and a sampler's buffers from
them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from distgnn_api.edge_types import EdgeType, edge_type_key
from distgnn_api.graph_size import GraphSize, distinct_draws
from distgnn_api.spec import Arch, DistGNNJobSpec

# sampling/static_sample.py: a fitted cap is the largest size seen times FIT_HEADROOM, plus
# FIT_SLACK, rounded up to a multiple of FIT_ROUND, and never over the bound
FIT_HEADROOM = 1.25
FIT_SLACK = 256
FIT_ROUND = 128
Sizes = dict[str, list[float]]
EdgeSizes = dict[EdgeType, list[float]]


@dataclass(frozen=True)
class TypedHops:
    """Per node type its nodes at each hop (the nodes new there), per relation its edges at
    each hop: caps, or an expected batch."""

    nodes: Sizes
    edges: EdgeSizes

    @property
    def num_layers(self) -> int:
        return len(next(iter(self.nodes.values()))) - 1

    def node_cap(self, node_type: str) -> float:
        """Nodes of ``node_type`` over all hops (HeteroStaticHops.node_cap)."""
        return sum(self.nodes[node_type])

    def target_cap(self, node_type: str) -> float:
        """Nodes of hops ``0..L-1``: the targets of relations into it (StaticCaps.target_cap)."""
        return sum(self.nodes[node_type][:-1])

    def dst_rows(self, layer: int, node_type: str) -> float:
        """Rows of ``node_type`` layer ``layer`` computes (HeteroStaticHops.dst_cap)."""
        return sum(self.nodes[node_type][: self.num_layers - layer])

    def layer_edges(self, layer: int, edge_type: EdgeType) -> float:
        """Edges of ``edge_type`` layer ``layer`` aggregates (HeteroStaticHops.edge_cap)."""
        return sum(self.edges[edge_type][: self.num_layers - layer])

    @property
    def node_slots(self) -> float:
        return sum(sum(v) for v in self.nodes.values())

    @property
    def edge_slots(self) -> float:
        return sum(sum(v) for v in self.edges.values())


def relation_fanouts(spec: DistGNNJobSpec, graph: GraphSize) -> dict[EdgeType, list[int]]:
    """Each relation's fanouts (hetero_load.py resolve_edge_fanouts): its ``edgeFanouts``
    entry, else ``fanout``. A key naming no relation is the workload's to refuse."""
    chosen = spec.model.edge_fanouts or {}
    return {
        r.edge_type: list(chosen.get(edge_type_key(r.edge_type), spec.model.fanout))
        for r in graph.relations
    }


def target_type(spec: DistGNNJobSpec, graph: GraphSize) -> str:
    """The seeds' node type: the spec's targetNodeType, else the store's, else the first
    featured type (the only one with labels in ogbn-mag's shape)."""
    hetero = spec.dataset.hetero_section
    names = [t.name for t in graph.node_types]
    for name in (hetero.target_node_type if hetero else None, graph.target_node_type):
        if name in names:
            return str(name)
    return (graph.featured_types or graph.node_types)[0].name


def bounds(
    graph: GraphSize, fanouts: Mapping[EdgeType, list[int]], seed_type: str, capacity: int
) -> TypedHops:
    """StaticCaps.bounds: hop 0 holds ``capacity`` seeds; relation ``(s, r, d)`` draws at
    most its fanout per node of ``d`` at hop ``h``; the nodes of ``s`` at hop ``h + 1`` are
    at most those draws and at most ``num_nodes[s]``."""
    num_nodes = {t.name: t.num_nodes for t in graph.node_types}
    nodes: Sizes = {t: [float(capacity if t == seed_type else 0)] for t in num_nodes}
    edges: EdgeSizes = {r.edge_type: [] for r in graph.relations}
    for h in range(len(next(iter(fanouts.values())))):
        reached = dict.fromkeys(num_nodes, 0.0)
        for et in edges:
            edges[et].append(nodes[et[2]][h] * max(fanouts[et][h], 0))
            reached[et[0]] += edges[et][h]
        for t, n in reached.items():
            nodes[t].append(min(n, float(num_nodes[t])))
    return TypedHops(nodes, edges)


def expected_batch(
    graph: GraphSize, fanouts: Mapping[EdgeType, list[int]], seed_type: str, batch_size: int
) -> TypedHops:
    """The expected mini-batch of ``batch_size`` seeds: per relation ``(s, r, d)`` and hop
    ``h``, the nodes of ``d`` new at ``h`` times ``min(fanout, its edges / num_nodes[d])``;
    per type the nodes new at each hop, ``N (1 - exp(-draws/N))`` distinct in all."""
    num_nodes = {t.name: t.num_nodes for t in graph.node_types}
    degree = {r.edge_type: r.num_edges / max(1, num_nodes[r.dst]) for r in graph.relations}
    nodes: Sizes = {t: [float(batch_size if t == seed_type else 0)] for t in num_nodes}
    draws = {t: v[0] for t, v in nodes.items()}
    distinct = dict(draws)
    edges: EdgeSizes = {et: [] for et in degree}
    for h in range(len(next(iter(fanouts.values())))):
        for et in edges:
            drawn = nodes[et[2]][h] * min(float(max(fanouts[et][h], 0)), degree[et])
            edges[et].append(drawn)
            draws[et[0]] += drawn
        for t, n in num_nodes.items():
            total = max(distinct[t], distinct_draws(draws[t], n))
            nodes[t].append(total - distinct[t])
            distinct[t] = total
    return TypedHops(nodes, edges)


def fit_cap(size: float, cap: float) -> float:
    """sampling/static_sample.py fitted_cap of a ``size`` (rounded up): times
    FIT_HEADROOM plus FIT_SLACK, rounded up to FIT_ROUND, at most ``cap``."""
    want = math.ceil(math.ceil(size) * FIT_HEADROOM) + FIT_SLACK
    return min(cap, float(-(-want // FIT_ROUND) * FIT_ROUND))


def fitted(bound: TypedHops, seen: TypedHops, fanouts: Mapping[EdgeType, list[int]]) -> TypedHops:
    """StaticCaps.fitted to a batch of the sizes ``seen``: each hop's cap :func:`fit_cap` of
    its size, within the bound (hop 0 keeps it); an edge cap also at most its target type's
    node cap times the fanout."""
    nodes: Sizes = {
        t: [b[0]] + [fit_cap(seen.nodes[t][h], b[h]) for h in range(1, len(b))]
        for t, b in bound.nodes.items()
    }
    edges: EdgeSizes = {
        et: [
            min(fit_cap(seen.edges[et][h], b[h]), nodes[et[2]][h] * max(fanouts[et][h], 0))
            for h in range(len(b))
        ]
        for et, b in bound.edges.items()
    }
    return TypedHops(nodes, edges)


@dataclass(frozen=True)
class TypedLayers:
    """models/relational.py LayerPlan with its widths: per layer the destination types it
    computes, the relations into them, the width of each type it reads and its output's."""

    dst_types: list[list[str]]
    edge_types: list[list[EdgeType]]
    input_types: list[str]
    """The types layer 0 reads (hops 0..L): their features, or their embeddings."""
    widths: list[dict[str, int]]
    outs: list[int]


def typed_layers(spec: DistGNNJobSpec, graph: GraphSize) -> TypedLayers:
    """The layers of ``model`` on ``graph``: hop 0 holds the target type, hop ``h + 1`` the
    sources of the relations into hop ``h``'s types; layer ``l`` computes hops
    ``0..L-l-1``. Inputs are features, or ``embeddingDim`` for a featureless type."""
    names = [t.name for t in graph.node_types]
    relations = [r.edge_type for r in graph.relations]
    layers = spec.model.num_layers
    hops = [{target_type(spec, graph)}]
    for _ in range(layers):
        hops.append({s for s, _, d in relations if d in hops[-1]})
    dst_types, edge_types = [], []
    for layer in range(layers):
        dst = set().union(*hops[: layers - layer])
        dst_types.append([t for t in names if t in dst])
        edge_types.append([et for et in relations if et[2] in dst])
    present = set().union(*hops)
    inputs = [t for t in names if t in present]
    width = {t.name: t.num_features or spec.model.embedding_size for t in graph.node_types}
    widths = [{t: width[t] for t in inputs}]
    widths += [dict.fromkeys(dst_types[i], spec.model.hidden_channels) for i in range(layers - 1)]
    outs = [spec.model.hidden_channels] * (layers - 1) + [graph.num_classes]
    return TypedLayers(dst_types, edge_types, inputs, widths, outs)


def typed_num_params(spec: DistGNNJobSpec, graph: GraphSize) -> int:
    """Trainable parameters of the relational model: R-SAGE (models/rsage.py) per layer and
    relation a SAGEConv, lin_l (W + bias) of the neighbours' mean and lin_r (W) of the
    root; R-GCN (models/rgcn.py) per relation a weight, per destination type a root and a
    bias."""
    plan = typed_layers(spec, graph)
    total = 0
    for layer, (widths, out) in enumerate(zip(plan.widths, plan.outs, strict=True)):
        for s, _, d in plan.edge_types[layer]:
            if spec.model.arch == Arch.rgcn:
                total += widths[s] * out
            else:
                total += widths[s] * out + out + widths[d] * out
        if spec.model.arch == Arch.rgcn:
            total += sum(widths[t] * out + out for t in plan.dst_types[layer])
    return total
