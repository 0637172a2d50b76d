"""The per-hop forward pass shared by the PyG-convolution models (GCN, GAT)."""

from __future__ import annotations

from collections.abc import Iterable

import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_workload.models.sage import check_hops
from distgnn_workload.sampling.hop_batch import HopBatch


class TrimmedConvs(nn.Module):
    """PyG convolutions run layer by layer over a HopBatch, each on the nodes its layer
    reads, with an activation and dropout between layers."""

    convs: nn.ModuleList

    def __init__(self, convs: Iterable[nn.Module], num_layers: int, dropout: float) -> None:
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.num_layers = num_layers
        self.dropout = dropout

    def _conv(
        self, conv: nn.Module, h: Tensor, num_src: int, num_dst: int, edges: Tensor
    ) -> Tensor:
        """One layer's outputs for its ``num_dst`` destinations."""
        raise NotImplementedError

    def _activation(self, h: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor, hop: HopBatch) -> Tensor:
        check_hops(hop, self.num_layers, x)
        h = x
        for layer, conv in enumerate(self.convs):
            num_src, num_dst, num_edges = hop.layer_sizes(layer)
            h = self._conv(conv, h, num_src, num_dst, hop.edge_index[:, :num_edges])
            if layer < self.num_layers - 1:
                h = F.dropout(self._activation(h), p=self.dropout, training=self.training)
        return h
