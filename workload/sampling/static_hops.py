"""A HopBatch padded to fixed shapes, per model layer, so that a training step can be a CUDA graph.

Every tensor a GraphSAGE step reads gets a size that depends only on the batch capacity B and
the fanouts f_1..f_L, never on the batch: hop h holds at most ``cap_h = B * f_1 * ... * f_h``
nodes and edges. Layer ``l`` (0 = first) works on ``k = L - l`` hops:

- its targets are the first ``T = n_0 + ... + n_{k-1}`` nodes, padded to
  ``Tc = cap_0 + ... + cap_{k-1}`` rows plus one dump row (``Tc + 1`` output rows);
- its sources are the rows of its input: the batch's nodes (layer 0, ``N_cap + 1`` rows, the
  last a zero dump row) or the previous layer's ``Tc + 1`` output rows;
- its edges are the first ``E = e_1 + ... + e_k`` edges, padded to ``Ec = cap_1 + ... + cap_k``
  with edges from the input's padding rows (after its real sources) to the padding targets
  ``[T, Tc]``, spread over both in target order so that no bag gets long, neither a
  target's in the forward nor a source's in the backward (one row holding every padding
  edge made the backward's segment sum run a single warp over ~17k edges: ~3.5 ms a step).

Padding rows never feed real rows: real edges only read real sources, and a target's row
reads only its own input row. Their gradient is zero (the loss reads only real seeds), so the
step computes the same logits and gradients as on the compact batch, in fixed shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from distgnn_workload.sampling.hop_batch import HopBatch


@dataclass(frozen=True)
class StaticLayout:
    """The fixed capacities of padded batches of up to ``batch_size`` seeds."""

    batch_size: int
    fanouts: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.batch_size < 1 or not self.fanouts or any(k < 1 for k in self.fanouts):
            raise ValueError(
                f"a static layout needs a batch size >= 1 and bounded fanouts, got "
                f"{self.batch_size} and {list(self.fanouts)}"
            )

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    @cached_property
    def hop_caps(self) -> list[int]:
        """Most nodes (and edges) per hop: B, B*f1, B*f1*f2, ..."""
        caps = [self.batch_size]
        for k in self.fanouts:
            caps.append(caps[-1] * k)
        return caps

    @property
    def node_cap(self) -> int:
        """Most nodes of a batch (the input has one more row, a zero dump row)."""
        return sum(self.hop_caps)

    def target_cap(self, layer: int) -> int:
        """Padded targets of ``layer`` (its output has one more row, a dump row)."""
        return sum(self.hop_caps[: self.num_layers - layer])

    def edge_cap(self, layer: int) -> int:
        return sum(self.hop_caps[1 : self.num_layers - layer + 1])

    def input_rows(self, layer: int) -> int:
        """Rows of ``layer``'s input, its dump row included."""
        return self.node_cap + 1 if layer == 0 else self.target_cap(layer - 1) + 1

    def index_sizes(self) -> list[int]:
        """Sizes of the per-layer index arrays (src, dst, ptr of layer 0, then layer 1, ...)."""
        sizes = []
        for layer in range(self.num_layers):
            edges = self.edge_cap(layer)
            sizes += [edges, edges, self.target_cap(layer) + 2]
        return sizes


@dataclass
class StaticHops:
    """Per layer ``l``: edge sources, targets and target CSR offsets, all of fixed size.

    ``src[l]``/``dst[l]`` are int64 ``[edge_cap(l)]``; ``ptr[l]`` is int64
    ``[target_cap(l) + 2]`` (one bag per output row, ``include_last_offset`` style). They are
    views of one buffer, ``index`` (one copy moves them all). Built by :func:`pad_hops`; the
    features go to rows ``[0, num_nodes)`` of a fixed input.
    """

    layout: StaticLayout
    index: Tensor
    num_nodes: int = 0
    num_seeds: int = 0

    @cached_property
    def _views(self) -> list[Tensor]:
        return list(torch.split(self.index, self.layout.index_sizes()))

    @property
    def src(self) -> list[Tensor]:
        return self._views[0::3]

    @property
    def dst(self) -> list[Tensor]:
        return self._views[1::3]

    @property
    def ptr(self) -> list[Tensor]:
        return self._views[2::3]

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        self.index.record_stream(stream)


def pad_hops(hop: HopBatch, layout: StaticLayout) -> StaticHops:
    """The fixed-shape form of ``hop`` (see the module docstring); a few kernels per layer."""
    if hop.num_hops != layout.num_layers:
        raise ValueError(
            f"a {hop.num_hops}-hop batch does not fit a {layout.num_layers}-layer layout"
        )
    if hop.num_seeds > layout.batch_size:
        raise ValueError(
            f"{hop.num_seeds} seeds exceed the layout's batch size {layout.batch_size}"
        )
    for h, (n, cap) in enumerate(zip(hop.num_nodes_per_hop, layout.hop_caps, strict=True)):
        if n > cap or (h and hop.num_edges_per_hop[h - 1] > cap):
            raise ValueError(
                f"hop {h} exceeds its capacity {cap}: fanouts larger than the layout's"
            )
    device = hop.edge_index.device
    edges = hop.edge_index.to(torch.int64)
    target_ptr = hop.get_target_ptr().to(device, torch.int64)
    index = torch.empty(sum(layout.index_sizes()), dtype=torch.int64, device=device)
    out = StaticHops(layout, index, hop.num_nodes, hop.num_seeds)
    for layer, (src, dst, ptr) in enumerate(zip(out.src, out.dst, out.ptr, strict=True)):
        sources, targets, num_edges = hop.layer_sizes(layer)
        pad_edges = src.numel() - num_edges
        pad_targets = ptr.numel() - 1 - targets  # >= 1: the dump target always pads
        pad_sources = layout.input_rows(layer) - sources  # >= 1: the dump row always pads
        per = max(1, math.ceil(pad_edges / pad_targets))
        src[:num_edges] = edges[0, :num_edges]
        src[num_edges:] = sources + torch.arange(pad_edges, device=device) % pad_sources
        dst[:num_edges] = edges[1, :num_edges]
        dst[num_edges:] = targets + torch.arange(pad_edges, device=device) // per
        ptr[: targets + 1] = target_ptr[: targets + 1]
        ptr[targets:] = num_edges + (torch.arange(pad_targets + 1, device=device) * per).clamp_(
            max=pad_edges
        )
    return out
