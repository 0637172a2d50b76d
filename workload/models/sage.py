"""GraphSAGE with per-hop trimming: layer l computes only the nodes that later layers read."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_workload.models.aggregation import Aggregation, aggregate, mean_aggregate
from distgnn_workload.models.layerwise import NeighbourhoodBlock
from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.static_hops import StaticHops


class SAGELayer(nn.Module):
    """``lin_l(mean_{j->i} x_j) + lin_r(x_i)``, PyG ``SAGEConv``'s mean form and parameter names.

    Sources are the first ``num_src`` rows of ``x``, targets its first ``num_dst`` rows.
    """

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels, bias=True)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def forward(
        self,
        x: Tensor,
        src: Tensor,
        dst: Tensor,
        target_ptr: Tensor,
        num_dst: int,
        aggregation: Aggregation = "segment",
    ) -> Tensor:
        agg = aggregate(x, src, dst, target_ptr, num_dst, aggregation)
        return self.combine(x[:num_dst], agg)

    def combine(self, x_dst: Tensor, agg: Tensor) -> Tensor:
        """``lin_l(agg) + lin_r(x_dst)``: the layer's output from its neighbours' mean."""
        # the bias rides on the root path; addmm adds the neighbour path in the GEMM epilogue
        out = F.linear(x_dst, self.lin_r.weight, self.lin_l.bias)
        return torch.addmm(out, agg, self.lin_l.weight.t())


ROW_PAD_BITS = 6
"""Targets are padded to a multiple of 2**(bit_length - this): at most 1/32 more rows."""


def padded_rows(rows: int, available: int) -> int:
    """``rows`` rounded up to a coarse multiple (a power of two ~1/32 of it), at most
    ``available``.

    Sampled batches have a different number of targets each time, so every GEMM of a step
    has a shape cuBLAS has not seen and pays its algorithm selection on the host again; a few
    extra rows make the shapes repeat from batch to batch.
    """
    multiple = 1 << max(0, rows.bit_length() - ROW_PAD_BITS)
    return max(rows, min(-(-rows // multiple) * multiple, available))


class GraphSAGE(nn.Module):
    """L SAGE layers with ReLU and dropout between them; forward returns the seeds' logits.

    ``pad_rows`` computes each layer for its targets padded to a coarse multiple (empty
    neighbourhoods, outputs dropped) so that GEMM shapes repeat across batches.
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
        dropout: float = 0.5,
        aggregation: Aggregation = "segment",
        pad_rows: bool = False,
    ) -> None:
        super().__init__()
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + [out_channels]
        self.convs = nn.ModuleList(SAGELayer(a, b) for a, b in itertools.pairwise(dims))
        self.num_layers = num_layers
        self.dropout = dropout
        self.aggregation: Aggregation = aggregation
        self.pad_rows = pad_rows

    def forward(self, x: Tensor, hop: HopBatch) -> Tensor:
        check_hops(hop, self.num_layers, x)
        src, dst = hop.edge_index[0], hop.edge_index[1]
        ptr = hop.get_target_ptr()
        if ptr.dtype != src.dtype:
            ptr = ptr.to(src.dtype)
        h = x
        for layer, conv in enumerate(self.convs):
            _, num_dst, num_edges = hop.layer_sizes(layer)
            rows = padded_rows(num_dst, h.size(0)) if self.pad_rows else num_dst
            layer_ptr = ptr[: num_dst + 1]
            if rows > num_dst:
                layer_ptr = torch.cat([layer_ptr, layer_ptr[-1:].expand(rows - num_dst)])
            h = conv(h, src[:num_edges], dst[:num_edges], layer_ptr, rows, self.aggregation)
            if rows > num_dst:
                h = h[:num_dst]
            if layer < self.num_layers - 1:
                h = F.relu(h)
                h = F.dropout(h, p=self.dropout, training=self.training)
        return h

    def inference_layer(self, layer: int, x: Tensor, block: NeighbourhoodBlock) -> Tensor:
        """Layer ``layer`` over a block of whole neighbourhoods, in eval semantics (no dropout).

        The same function as :meth:`forward`'s layer: the fused mean over each
        destination's in-neighbours, then ``combine``, then ReLU below the last layer.
        """
        conv = self.convs[layer]
        assert isinstance(conv, SAGELayer)
        ptr = block.ptr if block.ptr.dtype == block.src.dtype else block.ptr.to(block.src.dtype)
        h = conv.combine(x[: block.num_dst], mean_aggregate(x, block.src, ptr))
        return F.relu(h) if layer < self.num_layers - 1 else h

    def forward_static(self, x: Tensor, hops: StaticHops) -> Tensor:
        """The same model on a fixed-shape batch (:mod:`distgnn_workload.sampling.static_hops`).

        ``x`` has ``layout.node_cap + 1`` rows (the batch's features first, the last row
        zero). Returns ``batch_size + 1`` rows of logits: the seeds' first, then padding.
        Every shape depends on the layout alone, so a training step can be a CUDA graph.
        """
        layout = hops.layout
        if layout.num_layers != self.num_layers:
            raise ValueError(
                f"a {layout.num_layers}-layer layout for a {self.num_layers}-layer model"
            )
        if x.size(0) != layout.node_cap + 1:
            raise ValueError(f"x has {x.size(0)} rows, the layout needs {layout.node_cap + 1}")
        h = x
        for layer, conv in enumerate(self.convs):
            ptr = hops.ptr[layer]
            h = conv(h, hops.src[layer], hops.dst[layer], ptr, ptr.numel() - 1, self.aggregation)
            if layer < self.num_layers - 1:
                h = F.relu(h)
                h = F.dropout(h, p=self.dropout, training=self.training)
        return h


def check_hops(hop: HopBatch, num_layers: int, x: Tensor) -> None:
    """Raise a clear error when the batch does not fit the model."""
    if hop.num_hops != num_layers:
        raise ValueError(
            f"the HopBatch has {hop.num_hops} hops but the model has {num_layers} layers: "
            "sample with one fanout per layer"
        )
    if x.size(0) < hop.num_nodes:
        raise ValueError(f"x has {x.size(0)} rows but the HopBatch has {hop.num_nodes} nodes")
