"""Sampled batches in fixed shapes, so that a training step can be a CUDA graph.

Two forms, one per step, each what its kernels read:

- :class:`StaticHops` (:func:`pad_hops`): a homogeneous :class:`HopBatch` padded per model
  layer for the GraphSAGE step, sized by :class:`StaticLayout`;
- :class:`HeteroStaticHops`: typed batches copied into buffers sized by the typed sampler's bounds, masked on the device, for the step of a
  relational model.

Homogeneous padding. Every tensor a GraphSAGE step reads gets a size that depends only on
the batch capacity B and the fanouts f_1..f_L, never on the batch: hop h holds at most
``cap_h = B * f_1 * ... * f_h`` nodes and edges. Layer ``l`` (0 = first) works on ``k = L - l`` hops:

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

Typed buffers. A :class:`HeteroHopBatch` (a :class:`HopBatch` through ``typed()``) is
copied, prefix by prefix, into buffers sized by the typed sampler's bounds
(:class:`~distgnn_workload.sampling.static_sample.StaticCaps`): per edge type its sources,
targets and target CSR offsets, and one small tensor of the batch's real sizes per layer
(``counts``). What lies past a prefix is left from earlier batches; the layer views (:meth:`HeteroStaticHops.layer_edges`) mask it on the device, so one replay
serves every batch:

- layer ``l`` of an L-layer model computes ``dst_cap(l, t)`` rows per destination type
  (the bound of hops ``0..L-l-1``); the real ones are a prefix, the others are finite junk
  that no real edge and no seed reads, so their gradients are zero;
- its edges of ``(s, r, d)`` are the first ``edge_cap(l, et)`` positions; those past the
  real count go to dump targets past ``dst_cap`` (dropped after aggregation, so their
  gradients are zero) from source rows spread over the input, and the CSR offsets past the
  real targets are empty segments. One dump bag (or source row) holding every padding
  edge would be reduced by a single GPU thread block: at ogbn-mag's bounds (millions of
  padding edges per step) a run stalled on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.pinned_copies import copy_in
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.static_sample import StaticCaps


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


DUMP_BAG = 32
"""Most padding edges per dump bag (see :meth:`HeteroStaticHops.layer_edges`)."""


class HeteroStaticHops:
    """Fixed-shape edge buffers of typed batches of up to ``caps`` nodes and edges."""

    def __init__(
        self, caps: StaticCaps, edge_types: Sequence[EdgeType], device: torch.device
    ) -> None:
        self.caps = caps
        self.edge_types = list(edge_types)
        self.node_types = list(caps.nodes)
        self.num_layers = len(next(iter(caps.nodes.values()))) - 1
        self.device = device
        self.src = {et: self._zeros(sum(caps.edges[et])) for et in self.edge_types}
        self.dst = {et: self._zeros(sum(caps.edges[et])) for et in self.edge_types}
        self.ptr = {et: self._zeros(caps.target_cap(et[2]) + 1) for et in self.edge_types}
        # per layer: the real edges of each edge type, then the real targets of each node type
        self._slot: dict[tuple[int, EdgeType | str], int] = {}
        keys: list[EdgeType | str] = [*self.edge_types, *self.node_types]
        for layer in range(self.num_layers):
            for key in keys:
                self._slot[(layer, key)] = len(self._slot)
        self.counts = self._zeros(len(self._slot))
        longest = max(
            [2]
            + [v.numel() + 1 for v in self.src.values()]
            + [v.numel() + 1 for v in self.ptr.values()]
        )
        self._positions = torch.arange(longest, device=device)

    def _zeros(self, size: int) -> Tensor:
        return torch.zeros(size, dtype=torch.int64, device=self.device)

    # ------------------------------------------------------------------ sizes

    def node_cap(self, node_type: str) -> int:
        """Rows of ``node_type`` that a batch may hold (all hops)."""
        return sum(self.caps.nodes[node_type])

    def dst_cap(self, layer: int, node_type: str) -> int:
        """Rows of ``node_type`` that layer ``layer`` computes (the bound of its hops)."""
        return sum(self.caps.nodes[node_type][: self.num_layers - layer])

    def edge_cap(self, layer: int, edge_type: EdgeType) -> int:
        return sum(self.caps.edges[edge_type][: self.num_layers - layer])

    @property
    def seed_cap(self) -> int:
        """The batch capacity: rows of the seed type at hop 0."""
        return max(n[0] for n in self.caps.nodes.values())

    def fits(self, hop: HeteroHopBatch) -> bool:
        """Whether ``hop``'s sizes are within the caps (fitted caps may be exceeded)."""
        try:
            self.check(hop)
        except ValueError:
            return False
        return True

    def check(self, hop: HeteroHopBatch) -> None:
        """Raise if ``hop`` does not fit the caps (another graph, fanout or batch size, or a
        batch over fitted caps)."""
        if hop.num_hops != self.num_layers:
            raise ValueError(f"a {hop.num_hops}-hop batch in a {self.num_layers}-layer layout")
        for t, per_hop in hop.num_nodes_per_hop.items():
            caps = self.caps.nodes.get(t)
            if caps is None or any(n > c for n, c in zip(per_hop, caps, strict=True)):
                raise ValueError(f"the batch's {t!r} nodes per hop {per_hop} exceed {caps}")
        for et, per_hop in hop.num_edges_per_hop.items():
            ecaps = self.caps.edges.get(et)
            if ecaps is None or any(n > c for n, c in zip(per_hop, ecaps, strict=True)):
                raise ValueError(f"the batch's {et} edges per hop {per_hop} exceed {ecaps}")

    # ------------------------------------------------------------------ loading

    def load(self, hop: HeteroHopBatch) -> None:
        """Copy ``hop``'s edges and sizes in (a few copies per edge type, no host sync)."""
        self.check(hop)
        values = [0] * len(self._slot)
        for layer in range(self.num_layers):
            _, num_dst, num_edges = hop.layer_sizes(layer)
            for et in self.edge_types:
                values[self._slot[(layer, et)]] = num_edges.get(et, 0)
            for t in self.node_types:
                values[self._slot[(layer, t)]] = num_dst.get(t, 0)
        for et in self.edge_types:
            edges = hop.edge_index[et]
            n = edges.size(1)
            self.src[et][:n].copy_(edges[0], non_blocking=True)
            self.dst[et][:n].copy_(edges[1], non_blocking=True)
            ptr = hop.target_ptr[et]
            self.ptr[et][: ptr.numel()].copy_(ptr, non_blocking=True)
        copy_in(self.counts, values)

    # ------------------------------------------------------------------ layer views

    def src_rows(self, layer: int, node_type: str) -> int:
        """Rows of ``node_type`` that layer ``layer`` reads (its input's fixed size)."""
        if layer == 0:
            return self.node_cap(node_type)
        return self.dst_cap(layer - 1, node_type)

    def layer_edges(
        self, layer: int, edge_type: EdgeType
    ) -> tuple[Tensor, Tensor, Tensor, int, int]:
        """``(src, dst, ptr, rows, bags)`` of ``edge_type`` at layer ``layer``, fixed-shape.

        ``ptr`` has ``bags + 1`` offsets: one bag per computed row (``rows``), then dump
        bags of at most :data:`DUMP_BAG` padding edges each; aggregate into ``bags`` rows
        and keep the first ``rows``. The padding edges are spread over dump bags and
        source rows so that no bag (forward) or source row (backward) serialises them.
        """
        s, _, d = edge_type
        edges, rows = self.edge_cap(layer, edge_type), self.dst_cap(layer, d)
        dumps = max(1, -(-edges // DUMP_BAG))
        sources = max(1, self.src_rows(layer, s))
        real_edges = self.counts[self._slot[(layer, edge_type)]]
        real_rows = self.counts[self._slot[(layer, d)]]
        positions = self._positions[:edges]
        keep = positions < real_edges
        src = torch.where(keep, self.src[edge_type][:edges], positions % sources)
        dst = torch.where(keep, self.dst[edge_type][:edges], rows + positions % dumps)
        offsets = torch.where(
            self._positions[: rows + 1] <= real_rows, self.ptr[edge_type][: rows + 1], real_edges
        )
        step = self._positions[1 : dumps + 1]
        dump_offsets = real_edges + torch.div(
            (edges - real_edges) * step, dumps, rounding_mode="floor"
        )
        return src, dst, torch.cat([offsets, dump_offsets]), rows, rows + dumps
