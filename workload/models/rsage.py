"""R-SAGE: GraphSAGE made relational as PyG's ``to_hetero(GraphSAGE, metadata, aggr="sum")``
makes it, over a :class:`HeteroHopBatch` with per-hop trimming."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.models.aggregation import Aggregation
from distgnn_workload.models.relational import LayerPlan, RelationalGNN
from distgnn_workload.sampling.csr import type_key


class RelationSAGE(nn.Module):
    """One edge type ``(s, r, d)``'s ``SAGEConv((in_s, in_d), out)``: ``lin_l`` (with bias) of
    the neighbours' mean and ``lin_r`` (without) of the target's own input."""

    def __init__(self, in_src: int, in_dst: int, out_channels: int) -> None:
        super().__init__()
        self.lin_l = nn.Linear(in_src, out_channels, bias=True)
        self.lin_r = nn.Linear(in_dst, out_channels, bias=False)


class RSAGE(RelationalGNN):
    """``to_hetero(GraphSAGE)`` with ``aggr="sum"``: per layer and edge type ``(s, r, d)`` a
    SAGEConv, whose outputs are summed per destination type; ReLU and dropout between layers.

    Parameters are named as ``to_hetero`` names them, ``convs.<layer>.<src__rel__dst>.lin_l``
    and ``.lin_r``, so a ``to_hetero`` model's ``state_dict`` loads (``strict=False``: this
    one holds no weights that the seeds' logits never read, see :mod:`.relational`).

    The sum over the edge types into ``d`` is computed as one root GEMM, with the sum of
    their ``lin_r`` weights and ``lin_l`` biases, plus one GEMM per edge type on the
    neighbours' mean (the same function and gradients as the per-edge-type form).
    """

    def __init__(
        self,
        node_types: Sequence[str],
        edge_types: Sequence[EdgeType],
        in_channels: Mapping[str, int],
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        target_node_type: str | Sequence[str],
        dropout: float = 0.5,
        aggregation: Aggregation = "segment",
    ) -> None:
        plan = LayerPlan(node_types, edge_types, target_node_type, num_layers)
        super().__init__(plan, dropout, aggregation)
        for layer in range(num_layers - 1):
            for t in plan.dst_types[layer]:
                if not plan.relations_into(layer, t):
                    raise ValueError(
                        f"rsage: node type {t!r} receives no edge type, but layer {layer + 2} "
                        "reads it; add reverse relations (as ToUndirected does) or use rgcn, "
                        "whose root weight keeps such nodes"
                    )
        self.convs = nn.ModuleList()
        for layer, (widths, out) in enumerate(
            plan.dims(in_channels, hidden_channels, out_channels)
        ):
            self.convs.append(
                nn.ModuleDict(
                    {
                        type_key(et): RelationSAGE(widths[et[0]], widths[et[2]], out)
                        for et in plan.edge_types[layer]
                    }
                )
            )

    def relation(self, layer: int, edge_type: EdgeType) -> RelationSAGE:
        """Layer ``layer``'s SAGEConv of ``edge_type``."""
        convs = self.convs[layer]
        assert isinstance(convs, nn.ModuleDict)
        module = convs[type_key(edge_type)]
        assert isinstance(module, RelationSAGE)
        return module

    def combine(
        self, layer: int, x_dst: Mapping[str, Tensor], aggs: Mapping[str, list[Tensor]]
    ) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        for t, x in x_dst.items():
            rels = [self.relation(layer, et) for et in self.plan.relations_into(layer, t)]
            root: Tensor = rels[0].lin_r.weight
            bias: Tensor = rels[0].lin_l.bias
            if len(rels) > 1:
                root = torch.stack([m.lin_r.weight for m in rels]).sum(0)
                bias = torch.stack([m.lin_l.bias for m in rels]).sum(0)
            h = F.linear(x, root, bias)
            for module, agg in zip(rels, aggs[t], strict=True):
                h = torch.addmm(h, agg, module.lin_l.weight.t())
            out[t] = h
        return out
