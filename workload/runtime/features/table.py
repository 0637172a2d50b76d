"""The feature table of one holder: its own rows plus cached remote rows.

``slot[id]`` is the row of a node's features in the table (local rows first, cached rows
after), or -1 when it must be fetched. With a cache ratio of 1 every node has a row and a
gather is one GPU kernel, no host sync.

With a GPU budget (``samplers.featureMemory``) smaller than the table, the rows live in
pinned host memory (:mod:`~distgnn_workload.runtime.features.tiers`) and :meth:`place`
copies the hottest ones, up to the budget, to the GPU: the slots then say which tier holds a
row, and one gather kernel reads both tiers in place.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from distgnn_workload.runtime.features.layout import HolderData
from distgnn_workload.runtime.features.tiers import TieredRows, host_tier, own_rows, place_hot

log = logging.getLogger(__name__)


class FeatureTable:
    """Local rows plus cached remote rows, addressed by a global ``slot`` map."""

    def __init__(
        self,
        data: HolderData,
        num_nodes: int,
        device: torch.device,
        *,
        device_budget: int | None = None,
        capacity: int = 0,
    ) -> None:
        """``device_budget``: bytes of rows the GPU may hold (None: all of them);
        ``capacity``: rows to make room for (owned plus the cache to come)."""
        self.device = device
        self.start, self.end = data.start, data.end
        self.num_nodes = num_nodes
        self.num_features = int(data.features.shape[1])
        owned = int(data.features.shape[0])
        self.device_budget = device_budget
        tiers, self.row_ids, self.tiered = own_rows(
            data.features, torch.arange(data.start, data.end), capacity, device_budget, device
        )
        """``row_ids``: the node of each host row (placement ranks them by hotness)."""
        slot = torch.full((num_nodes,), -1, dtype=torch.int32, device=device)
        slot[data.start : data.end] = torch.arange(owned, dtype=torch.int32, device=device)
        self._placed = (tiers, slot)
        """The rows and the slot map, swapped together: a reader sees one placement."""
        self.num_cached = 0
        self._free = owned

    @property
    def tiers(self) -> TieredRows:
        return self._placed[0]

    @tiers.setter
    def tiers(self, tiers: TieredRows) -> None:
        self._placed = (tiers, self._placed[1])

    @property
    def slot(self) -> Tensor:
        """int32 [num_nodes] on the device: each node's row, -1 where it must be fetched."""
        return self._placed[1]

    @property
    def dtype(self) -> torch.dtype:
        return self.tiers.dtype

    @property
    def num_remote(self) -> int:
        return self.num_nodes - (self.end - self.start)

    @property
    def complete(self) -> bool:
        """Every node has a row: gathers need no RPC and no host sync."""
        return self.num_cached >= self.num_remote

    @property
    def device_rows(self) -> int:
        """Rows in GPU memory (all of them without a budget)."""
        return self.tiers.split

    @property
    def host_rows(self) -> int:
        """Rows read from pinned host memory only (not also on the GPU)."""
        return self._free - self.tiers.split if self.tiered else 0

    def gather(self, slot: Tensor, out: Tensor | None = None) -> Tensor:
        """The rows at ``slot`` (valid slots, on the table's device), from either tier."""
        return self.tiers.gather(slot, out)

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more cached rows (one allocation for the whole cache)."""
        if count <= 0:
            return
        tiers = self.tiers
        if self.tiered:
            assert tiers.host_rows is not None
            need = self._free + count - tiers.num_host
            if need > 0:  # more than the capacity made room for: one larger registration
                grown = host_tier(tiers.num_host + need, self.num_features, self.dtype, self.device)
                assert grown.host_rows is not None
                grown.host_rows[: tiers.num_host] = tiers.host_rows
                self.tiers = TieredRows(
                    tiers.device_rows, grown.host_rows, grown.host_view, grown.host_base
                )
                self.row_ids = torch.cat([self.row_ids, self.row_ids.new_empty(need)])
            return
        extra = torch.empty((count, self.num_features), dtype=self.dtype, device=self.device)
        self.tiers = TieredRows(torch.cat([tiers.device_rows, extra]))
        self._free = int(self.tiers.device_rows.shape[0]) - count

    def add_cached(self, ids: Tensor, rows: Tensor) -> None:
        """Keep ``rows`` as the features of the remote nodes ``ids`` (after :meth:`reserve`)."""
        n = int(ids.numel())
        if n == 0:
            return
        if self.tiered:
            self.reserve(n)
            host = self.tiers.host_rows
            assert host is not None
            base = self._free
            host[base : base + n] = rows.to("cpu", self.dtype)
            self.row_ids[base : base + n] = ids.to("cpu", torch.int64)
            slots = torch.arange(base, base + n, dtype=torch.int32) + self.tiers.split
        else:
            if self._free + n > self.tiers.num_rows:
                self.reserve(self._free + n - self.tiers.num_rows)
            base = self._free
            self.tiers.device_rows[base : base + n] = rows.to(self.device, self.dtype)
            slots = torch.arange(base, base + n, dtype=torch.int32)
        self.slot[ids.to(self.device)] = slots.to(self.device)
        self._free += n
        self.num_cached += n

    def place(self, hotness: Tensor | None) -> None:
        """Copy the hottest held rows, up to the GPU budget, to the GPU (a tiered table).

        ``hotness``: a score per node (pre-sampled access counts), or None to keep the
        owned rows' order. The host tier keeps every row; the slots of the hot ones point
        to their GPU copies from now on.
        """
        if not self.tiered:
            return
        assert self.device_budget is not None
        held = self._free
        ids = self.row_ids[:held]
        score = None if hotness is None else hotness.to("cpu")[ids]
        placed, slot = place_hot(self.tiers, held, self.device_budget, score, self.device)
        new_slot = self.slot.clone()
        new_slot[ids.to(self.device)] = slot.to(self.device)
        self._placed = (placed, new_slot)
        cap = placed.split
        log.info(
            "feature table: %d of %d rows (%.0f%%) on the GPU, %d read from pinned host memory",
            cap,
            held,
            100.0 * cap / max(held, 1),
            held - cap,
        )

    def local_rows(self, ids: Tensor) -> Tensor:
        """Features of nodes this holder owns (ids on any device)."""
        ids = ids.to(self.device)
        if not self.tiered:  # index_select: a row gather, faster than advanced indexing
            local = ids if self.start == 0 else ids - self.start
            return torch.index_select(self.tiers.device_rows, 0, local)
        tiers, slot = self._placed
        return tiers.gather(slot[ids])
