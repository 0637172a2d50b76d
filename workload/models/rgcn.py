"""R-GCN (PyG ``RGCNConv`` semantics) over a :class:`HeteroHopBatch`, with per-hop trimming."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.models.aggregation import Aggregation
from distgnn_workload.models.relational import LayerPlan, RelationalGNN
from distgnn_workload.sampling.csr import type_key


def _glorot(tensor: Tensor) -> None:
    """PyG's ``glorot``: uniform in +-sqrt(6 / (fan_in + fan_out)) over the last two dims."""
    bound = math.sqrt(6.0 / (tensor.size(-2) + tensor.size(-1)))
    nn.init.uniform_(tensor, -bound, bound)


class RGCNLayer(nn.Module):
    """``x'_i = x_i Theta_root(t_i) + b(t_i) + sum_r mean_{j in N_r(i)} x_j Theta_r``.

    ``RGCNConv``'s mean aggregation per relation and its names and layouts: ``weight`` per
    edge type ``[in_src, out]`` (``x @ weight``), ``root`` ``[in_dst, out]`` and ``bias``.
    ``RGCNConv`` runs on the homogeneous view of the graph, so it has one root weight and one
    bias for all nodes; here each destination node type has its own (as OGB's ogbn-mag R-GCN
    has), which is ``RGCNConv`` when they are equal, and lets node types have different
    input widths. With ``num_bases``, ``weight[r] = sum_b comp[r, b] * bases[b]``
    (``RGCNConv``'s basis decomposition; its ``weight`` is ``bases`` here), which needs one
    input width for all source types.
    """

    def __init__(
        self,
        edge_types: Sequence[EdgeType],
        dst_types: Sequence[str],
        in_channels: Mapping[str, int],
        out_channels: int,
        num_bases: int | None = None,
    ) -> None:
        super().__init__()
        self.keys = [type_key(et) for et in edge_types]
        self.weight = nn.ParameterDict()
        self.bases: nn.Parameter | None = None
        self.comp: nn.Parameter | None = None
        if num_bases is None:
            for key, et in zip(self.keys, edge_types, strict=True):
                self.weight[key] = nn.Parameter(torch.empty(in_channels[et[0]], out_channels))
        else:
            widths = {in_channels[et[0]] for et in edge_types}
            if num_bases < 1 or len(widths) != 1:
                raise ValueError(
                    f"rgcn num_bases={num_bases}: basis decomposition needs num_bases >= 1 and "
                    f"one input width for every source type, got widths {sorted(widths)}; set "
                    "model.embeddingDim to the feature width"
                )
            self.bases = nn.Parameter(torch.empty(num_bases, widths.pop(), out_channels))
            self.comp = nn.Parameter(torch.empty(len(edge_types), num_bases))
        self.root = nn.ParameterDict(
            {t: nn.Parameter(torch.empty(in_channels[t], out_channels)) for t in dst_types}
        )
        self.bias = nn.ParameterDict(
            {t: nn.Parameter(torch.zeros(out_channels)) for t in dst_types}
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for p in self.weight.values():
            _glorot(p)
        if self.bases is not None and self.comp is not None:
            _glorot(self.bases)
            _glorot(self.comp)
        for p in self.root.values():
            _glorot(p)
        for p in self.bias.values():
            nn.init.zeros_(p)

    def relation_weights(self) -> dict[str, Tensor]:
        """Each edge type's ``[in_src, out]`` weight (composed from the bases if any)."""
        if self.bases is None or self.comp is None:
            return dict(self.weight.items())
        composed = torch.einsum("rb,bio->rio", self.comp, self.bases)
        return dict(zip(self.keys, composed.unbind(0), strict=True))


class RGCN(RelationalGNN):
    """L :class:`RGCNLayer` with ReLU and dropout between them; forward returns the seeds'
    logits. ``convs.<layer>`` holds the layer's weights (only those for edge types whose
    outputs a later layer reads, see :mod:`.relational`)."""

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
        num_bases: int | None = None,
        aggregation: Aggregation = "segment",
    ) -> None:
        plan = LayerPlan(node_types, edge_types, target_node_type, num_layers)
        super().__init__(plan, dropout, aggregation)
        self.convs = nn.ModuleList(
            RGCNLayer(plan.edge_types[layer], plan.dst_types[layer], widths, out, num_bases)
            for layer, (widths, out) in enumerate(
                plan.dims(in_channels, hidden_channels, out_channels)
            )
        )

    def layer(self, layer: int) -> RGCNLayer:
        """The weights of layer ``layer`` (0 = first)."""
        conv = self.convs[layer]
        assert isinstance(conv, RGCNLayer)
        return conv

    def combine(
        self, layer: int, x_dst: Mapping[str, Tensor], aggs: Mapping[str, list[Tensor]]
    ) -> dict[str, Tensor]:
        conv = self.layer(layer)
        weights = conv.relation_weights()
        out: dict[str, Tensor] = {}
        for t, x in x_dst.items():
            h = torch.addmm(conv.bias[t], x, conv.root[t])
            for et, agg in zip(self.plan.relations_into(layer, t), aggs[t], strict=True):
                h = torch.addmm(h, agg, weights[type_key(et)])
            out[t] = h
        return out
