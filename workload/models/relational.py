"""What relational models share: which relations each layer computes, and the layer loop over
a :class:`HeteroHopBatch` with per-hop trimming.

An L-layer model over a batch sampled around seeds of the target type reads, at layer ``l``
(0 = first), the nodes of hops ``0..L-l`` and computes the nodes of hops ``0..L-l-1``. The
node types that can occur at hop ``h`` follow from the graph's metadata alone: the target
type at hop 0, then the source types of the edge types into the types of hop ``h - 1``. So
layer ``l`` holds weights only for the edge types into the types of hops ``0..L-l-1`` (the
last layer: only those into the target type); every parameter takes part in every step,
as DistributedDataParallel needs. Which relations a layer computes never depends on the
batch: a relation with no sampled edges still runs (on zero rows).

A link-prediction encoder has two target types, the ends of its edge type (both at hop 0,
:meth:`RelationalGNN.embed_seeds` returns the seeds' rows of each); a classifier has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.models.aggregation import Aggregation, aggregate
from distgnn_workload.sampling.csr import type_key
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_hops import HeteroStaticHops


class LayerPlan:
    """Per layer, the destination types it computes and the edge types it aggregates over.

    ``dst_types[l]`` keeps the order of ``node_types``; ``edge_types[l]`` the order of the
    given edge types. ``types_at_hop[h]`` are the node types that hop ``h`` may hold.
    """

    def __init__(
        self,
        node_types: Sequence[str],
        edge_types: Sequence[EdgeType],
        target_node_type: str | Sequence[str],
        num_layers: int,
    ) -> None:
        """``target_node_type``: the type whose rows the last layer outputs, or several
        (link prediction embeds both ends of an edge type; the first is the main one)."""
        if num_layers < 1:
            raise ValueError(f"model.numLayers must be at least 1, got {num_layers}")
        targets = (
            [target_node_type] if isinstance(target_node_type, str) else list(target_node_type)
        )
        if not targets:
            raise ValueError("a relational model needs at least one target node type")
        for target in targets:
            if target not in node_types:
                raise ValueError(
                    f"the target node type {target!r} is not one of the graph's node "
                    f"types {list(node_types)}"
                )
        if not edge_types:
            raise ValueError("a relational model needs at least one edge type")
        for et in edge_types:
            for t in (et[0], et[2]):
                if t not in node_types:
                    raise ValueError(
                        f"edge type {type_key(et)!r} names node type {t!r}, which is not one "
                        f"of {list(node_types)}"
                    )
        if len(set(edge_types)) != len(edge_types):
            raise ValueError("edge_types lists an edge type twice")
        self.node_types = list(node_types)
        self.all_edge_types = list(edge_types)
        self.target_node_types = list(dict.fromkeys(targets))
        self.target_node_type = self.target_node_types[0]
        self.num_layers = num_layers
        hops = [set(self.target_node_types)]
        for _ in range(num_layers):
            hops.append({s for s, _, d in edge_types if d in hops[-1]})
        self.types_at_hop = [[t for t in node_types if t in h] for h in hops]
        self.dst_types: list[list[str]] = []
        self.edge_types: list[list[EdgeType]] = []
        for layer in range(num_layers):
            dst = set().union(*hops[: num_layers - layer])
            self.dst_types.append([t for t in node_types if t in dst])
            self.edge_types.append([et for et in edge_types if et[2] in dst])
        for target in self.target_node_types:
            if not any(et[2] == target for et in edge_types):
                raise ValueError(
                    f"no edge type leads into the target node type {target!r}: the model "
                    "would never read a neighbour"
                )

    @property
    def input_types(self) -> list[str]:
        """The node types whose inputs layer 0 reads (hops ``0..L``)."""
        present = set().union(*(set(h) for h in self.types_at_hop))
        return [t for t in self.node_types if t in present]

    def relations_into(self, layer: int, node_type: str) -> list[EdgeType]:
        return [et for et in self.edge_types[layer] if et[2] == node_type]

    def dims(
        self, in_channels: Mapping[str, int], hidden_channels: int, out_channels: int
    ) -> list[tuple[dict[str, int], int]]:
        """Per layer: the input width of each node type it reads, and its output width."""
        missing = [t for t in self.input_types if t not in in_channels]
        if missing:
            raise ValueError(
                f"in_channels has no width for node type(s) {missing}: give the feature width, "
                "or the embedding size (model.embeddingDim) for types without features"
            )
        for t, width in in_channels.items():
            if width < 1:
                raise ValueError(f"in_channels[{t!r}] is {width}: widths must be >= 1")
        widths: dict[str, int] = {t: int(in_channels[t]) for t in self.input_types}
        out: list[tuple[dict[str, int], int]] = []
        for layer in range(self.num_layers):
            last = layer == self.num_layers - 1
            width = out_channels if last else hidden_channels
            out.append((widths, width))
            widths = dict.fromkeys(self.dst_types[layer], width)
        return out


def check_batch(batch: HeteroHopBatch, plan: LayerPlan, x: Mapping[str, Tensor]) -> None:
    """Raise a clear error when the batch or the inputs do not fit the model."""
    if batch.num_hops != plan.num_layers:
        raise ValueError(
            f"the HeteroHopBatch has {batch.num_hops} hops but the model has "
            f"{plan.num_layers} layers: sample with one fanout per layer"
        )
    if batch.seed_type not in plan.target_node_types:
        raise ValueError(
            f"the batch's seeds are of type {batch.seed_type!r} but the model predicts "
            f"{plan.target_node_type!r}"
        )
    missing = [et for et in plan.edge_types[0] if et not in batch.edge_index]
    if missing:
        raise ValueError(
            f"the batch has no edges of type(s) {[type_key(et) for et in missing]}: sample the "
            "graph the model was built for"
        )
    counts = batch.num_nodes
    for t in plan.input_types:
        need = counts.get(t, 0)
        if t not in x:
            raise ValueError(
                f"x has no entry for node type {t!r} ({need} sampled nodes): give every node "
                "type's rows, an empty tensor where the batch has none"
            )
        if x[t].size(0) < need:
            raise ValueError(f"x[{t!r}] has {x[t].size(0)} rows but the batch has {need} nodes")


class RelationalGNN(nn.Module):
    """The layer loop of a relational model; subclasses give ``combine``.

    ``combine(layer, x_dst, aggs)`` returns a layer's output per destination type (before
    the activation) from the rows it computes, ``x_dst[t]``, and, per edge type into ``t``,
    the mean of their sampled neighbours' inputs (``aggs[t]``, in ``plan.relations_into``
    order).
    """

    def __init__(
        self,
        plan: LayerPlan,
        dropout: float = 0.5,
        aggregation: Aggregation = "segment",
    ) -> None:
        super().__init__()
        self.plan = plan
        self.num_layers = plan.num_layers
        self.target_node_type = plan.target_node_type
        self.dropout = dropout
        self.aggregation: Aggregation = aggregation

    def combine(
        self, layer: int, x_dst: Mapping[str, Tensor], aggs: Mapping[str, list[Tensor]]
    ) -> dict[str, Tensor]:
        raise NotImplementedError

    def forward(self, x: Mapping[str, Tensor], batch: HeteroHopBatch) -> Tensor:
        """The logits of the batch's seeds, in seed order."""
        return self._seed_outputs(x, batch)[self.target_node_type][: batch.num_seeds]

    def embed_seeds(self, x: Mapping[str, Tensor], batch: HeteroHopBatch) -> dict[str, Tensor]:
        """The last layer's rows of the seeds of every target type (hop 0, in seed order)."""
        out = self._seed_outputs(x, batch)
        return {t: out[t][: batch.seed_rows(t)] for t in self.plan.target_node_types}

    def _seed_outputs(self, x: Mapping[str, Tensor], batch: HeteroHopBatch) -> dict[str, Tensor]:
        check_batch(batch, self.plan, x)

        def edges(layer: int, et: EdgeType) -> tuple[Tensor, Tensor, Tensor, int]:
            _, num_dst, num_edges = batch.layer_sizes(layer)
            pair = batch.edge_index[et][:, : num_edges[et]]
            ptr = batch.target_ptr[et][: num_dst[et[2]] + 1]
            return pair[0], pair[1], ptr.to(pair.dtype), num_dst[et[2]]

        def rows(layer: int, t: str) -> int:
            return batch.layer_sizes(layer)[1][t]

        return self._layers(x, edges, rows)

    def forward_static(self, x: Mapping[str, Tensor], hops: HeteroStaticHops) -> Tensor:
        """The logits of a fixed-shape batch's ``hops.seed_cap`` padded seeds (the real ones
        first); ``x[t]`` has ``hops.node_cap(t)`` rows, the real ones first (see
        :mod:`~distgnn_workload.sampling.static_hops`). No host sync: CUDA graphs
        capture it."""

        def edges(layer: int, et: EdgeType) -> tuple[Tensor, Tensor, Tensor, int]:
            src, dst, ptr, _, bags = hops.layer_edges(layer, et)
            return src, dst, ptr, bags  # the dump bags' rows are dropped by _layers

        def rows(layer: int, t: str) -> int:
            return hops.dst_cap(layer, t)

        return self._layers(x, edges, rows)[self.target_node_type][: hops.seed_cap]

    def _layers(
        self,
        x: Mapping[str, Tensor],
        edges: Callable[[int, EdgeType], tuple[Tensor, Tensor, Tensor, int]],
        rows: Callable[[int, str], int],
    ) -> dict[str, Tensor]:
        """The layer loop: ``edges(layer, et)`` gives sources, targets, target CSR offsets and
        the aggregated rows; ``rows(layer, t)`` the rows a layer computes for type ``t``.
        Returns the last layer's rows of every type it computes (the target types)."""
        h: Mapping[str, Tensor] = x
        for layer in range(self.num_layers):
            aggs: dict[str, list[Tensor]] = {t: [] for t in self.plan.dst_types[layer]}
            for et in self.plan.edge_types[layer]:
                s, _, d = et
                src, dst, ptr, num = edges(layer, et)
                agg = aggregate(h[s], src, dst, ptr, num, self.aggregation)
                aggs[d].append(agg[: rows(layer, d)])
            x_dst = {t: h[t][: rows(layer, t)] for t in self.plan.dst_types[layer]}
            out = self.combine(layer, x_dst, aggs)
            if layer < self.num_layers - 1:
                out = {
                    t: F.dropout(F.relu(v), p=self.dropout, training=self.training)
                    for t, v in out.items()
                }
            h = out
        return dict(h)
