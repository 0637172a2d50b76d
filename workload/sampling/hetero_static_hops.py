"""The fixed-shape form of typed batches: what a CUDA-graph step of a relational model reads.

A :class:`HeteroHopBatch` is copied, prefix by prefix, into buffers sized by the typed
sampler's bounds (:class:`~distgnn_workload.sampling.static_sample.StaticCaps`): per edge
type its sources, targets and target CSR offsets, and one small tensor of the batch's real
sizes per layer (``counts``). What lies past a prefix is left from earlier batches; the
layer views (:meth:`HeteroStaticHops.layer_edges`) mask it on the device, so one replay
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

from collections.abc import Sequence

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_sample import StaticCaps

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

    def check(self, hop: HeteroHopBatch) -> None:
        """Raise if ``hop`` does not fit the bounds (another graph, fanout or batch size)."""
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
        sizes = torch.tensor(values, dtype=torch.int64)
        if self.device.type == "cuda":
            sizes = sizes.pin_memory()  # the caching host allocator keeps it until copied
        self.counts.copy_(sizes, non_blocking=True)

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
