"""A plain R-SAGE over a :class:`HeteroHopBatch`, used until ``models`` has a relational model."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType, edge_type_key
from distgnn_api.spec import ModelSpec
from distgnn_workload.sampling.hetero_hop_batch import HeteroHopBatch


class _RSageLayer(nn.Module):
    def __init__(
        self, node_types: Sequence[str], edge_types: Sequence[EdgeType], dim_in: int, dim_out: int
    ) -> None:
        super().__init__()
        self.edge_types = list(edge_types)
        self.root = nn.ModuleDict({t: nn.Linear(dim_in, dim_out) for t in node_types})
        self.rel = nn.ModuleDict(
            {edge_type_key(et): nn.Linear(dim_in, dim_out, bias=False) for et in edge_types}
        )

    def forward(self, h: dict[str, Tensor], batch: HeteroHopBatch, layer: int) -> dict[str, Tensor]:
        _, num_dst, num_edges = batch.layer_sizes(layer)
        out = {t: self.root[t](h[t][: num_dst[t]]) for t in h if num_dst[t] > 0}
        for et in self.edge_types:
            s, _, d = et
            n = num_edges[et]
            if d not in out or n == 0:
                continue
            src, dst = batch.edge_index[et][:, :n]
            agg = torch.zeros((num_dst[d], h[s].shape[1]), dtype=h[s].dtype, device=h[s].device)
            agg.index_add_(0, dst, h[s][src])
            deg = torch.bincount(dst, minlength=num_dst[d]).clamp(min=1).unsqueeze(1)
            out[d] = out[d] + self.rel[edge_type_key(et)](agg / deg.to(agg.dtype))
        return out


class FallbackRSage(nn.Module):
    """Per-type input projections, then ``num_layers`` mean-aggregating relational layers."""

    def __init__(
        self,
        spec: ModelSpec,
        node_types: Sequence[str],
        edge_types: Sequence[EdgeType],
        in_channels: dict[str, int],
        out_channels: int,
        target_node_type: str,
    ) -> None:
        super().__init__()
        hidden = spec.hidden_channels
        self.target = target_node_type
        self.dropout = spec.dropout
        self.inputs = nn.ModuleDict({t: nn.Linear(in_channels[t], hidden) for t in node_types})
        self.layers = nn.ModuleList(
            [_RSageLayer(node_types, edge_types, hidden, hidden) for _ in range(spec.num_layers)]
        )
        self.head = nn.Linear(hidden, out_channels)

    def forward(self, x: dict[str, Tensor], batch: HeteroHopBatch) -> Tensor:
        h = {t: self.inputs[t](v) for t, v in x.items()}
        for i, layer in enumerate(self.layers):
            h = layer(h, batch, i)
            h = {t: F.dropout(v.relu(), self.dropout, self.training) for t, v in h.items()}
        out: Tensor = self.head(h[self.target][: batch.num_seeds])
        return out
