"""GCN and GAT over a HopBatch, built from PyG convolutions with per-hop trimming."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv

from distgnn_workload.models.hop_convs import TrimmedConvs
from distgnn_workload.models.layerwise import NeighbourhoodBlock


class GCN(TrimmedConvs):
    """GCN (symmetric normalisation with self-loops on the sampled graph), trimmed per layer."""

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        dropout: float = 0.5,
    ) -> None:
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        super().__init__((GCNConv(a, b) for a, b in itertools.pairwise(dims)), num_layers, dropout)

    def _conv(
        self, conv: nn.Module, h: Tensor, num_src: int, num_dst: int, edges: Tensor
    ) -> Tensor:
        # GCN normalises over the layer's whole node set, so it runs on the sources
        out: Tensor = conv(h[:num_src], edges)
        return out[:num_dst]

    def _activation(self, h: Tensor) -> Tensor:
        return F.relu(h)

    def inference_layer(self, layer: int, x: Tensor, block: NeighbourhoodBlock) -> Tensor:
        """Layer ``layer`` over a block of whole neighbourhoods, in eval semantics.

        ``GCNConv`` on the whole graph: ``sum_j x_j W / sqrt(d_i d_j) + b`` over the
        in-neighbours and the node itself, with ``d`` the in-degree plus one. The conv
        cannot run on a block itself (it would take degrees from the block's edges), so
        the normalised sum is formed here, before the conv's linear map (which commutes).
        """
        conv = self.convs[layer]
        assert isinstance(conv, GCNConv)
        norm = (block.degree.to(torch.float32) + 1.0).rsqrt()
        src = block.src
        weight = (norm[src] * norm[: block.num_dst].repeat_interleave(block.ptr.diff())).to(x.dtype)
        ptr = block.ptr.to(src.dtype)
        agg = F.embedding_bag(
            src, x, ptr, mode="sum", per_sample_weights=weight, include_last_offset=True
        )
        agg = agg + x[: block.num_dst] * norm[: block.num_dst].square().to(x.dtype).unsqueeze(1)
        h = conv.lin(agg)
        if conv.bias is not None:
            h = h + conv.bias
        return self._activation(h) if layer < self.num_layers - 1 else h


class GAT(TrimmedConvs):
    """GAT with ``heads`` concatenated heads in hidden layers and one head at the output."""

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        heads: int = 4,
        dropout: float = 0.5,
    ) -> None:
        per_head = max(1, hidden_channels // heads)
        convs: list[nn.Module] = []
        dim = in_channels
        for _ in range(num_layers - 1):
            convs.append(GATConv(dim, per_head, heads=heads, concat=True))
            dim = per_head * heads
        convs.append(GATConv(dim, out_channels, heads=1, concat=False))
        super().__init__(convs, num_layers, dropout)

    def _conv(
        self, conv: nn.Module, h: Tensor, num_src: int, num_dst: int, edges: Tensor
    ) -> Tensor:
        out: Tensor = conv((h[:num_src], h[:num_dst]), edges)
        return out

    def _activation(self, h: Tensor) -> Tensor:
        return F.elu(h)

    def inference_layer(self, layer: int, x: Tensor, block: NeighbourhoodBlock) -> Tensor:
        """Layer ``layer`` over a block of whole neighbourhoods, in eval semantics.

        The conv itself runs on the block: attention is a softmax over each destination's
        in-edges (plus its self-loop, which ``GATConv`` adds for the destinations, the
        first ``num_dst`` sources), so the block holds everything it reads.
        """
        conv = self.convs[layer]
        h: Tensor = conv((x, x[: block.num_dst]), block.edge_index())
        return self._activation(h) if layer < self.num_layers - 1 else h
