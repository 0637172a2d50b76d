"""The feature table of one node type on one holder: its own rows plus cached remote rows.

``slot[id]`` is the row of a node's features in the table (owned rows first, cached rows
after), or -1 when it must be fetched. With a cache ratio of 1 every node has a row and a
gather is one GPU kernel, no host sync. A homogeneous holder owns a contiguous range of
new ids (:meth:`FeatureTable.for_holder`); a node type of a typed store is owned by
partition through an ``owner`` map, in no particular id order.

With a GPU budget (``samplers.featureMemory``) smaller than the table, the rows live in
pinned host memory (:mod:`~distgnn_workload.runtime.features.tiers`) and :meth:`place`
copies the hottest ones, up to the budget, to the GPU: the slots then say which tier holds a
row, and one gather kernel reads both tiers in place.
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from distgnn_workload.data.graph import NODE_TYPE
from distgnn_workload.runtime.features.layout import HolderData
from distgnn_workload.runtime.features.tiers import TieredRows, host_tier, own_rows, place_hot

log = logging.getLogger(__name__)


class FeatureTable:
    """Owned rows plus cached remote rows of one node type, addressed by a ``slot`` map."""

    def __init__(
        self,
        owned_rows: Tensor,
        owned_ids: Tensor,
        num_nodes: int,
        device: torch.device,
        *,
        node_type: str = NODE_TYPE,
        owner: Tensor | None = None,
        partition: int = 0,
        device_budget: int | None = None,
        capacity: int = 0,
    ) -> None:
        """``owned_ids``: the ids of ``owned_rows`` (host int64); a contiguous range unless
        ``owner`` (the owning partition of every id) says who owns what, ``partition``
        being this holder's. ``device_budget``: bytes of rows the GPU may hold (None: all
        of them); ``capacity``: rows to make room for (owned plus the cache to come)."""
        owned = int(owned_ids.numel())
        if int(owned_rows.shape[0]) != owned:
            raise ValueError(
                f"node type {node_type!r}: {owned_rows.shape[0]} rows for {owned} owned nodes"
            )
        ids = owned_ids.to("cpu", torch.int64)
        self.node_type = node_type
        self.partition = partition
        self.device = device
        self.num_nodes = num_nodes
        self.num_owned = owned
        self.num_features = int(owned_rows.shape[1])
        self.device_budget = device_budget
        self.start = int(ids[0]) if owned else 0
        self.end = self.start + owned
        """The owned range of a table without an owner map."""
        self.owner = None if owner is None else owner.to(device, torch.int64)
        """The owning partition of every node (on the device), or None: a range table."""
        tiers, self.row_ids, self.tiered = own_rows(
            owned_rows, ids.clone(), capacity, device_budget, device
        )
        """``row_ids``: the node of each host row (placement ranks them by hotness)."""
        slot = torch.full((num_nodes,), -1, dtype=torch.int32, device=device)
        rows = torch.arange(owned, dtype=torch.int32, device=device)
        self.own_slot: Tensor | None = None
        """The row of each owned node, -1 elsewhere, on the host (serving by owner map)."""
        if owner is None:
            if owned and int(ids[-1]) != self.end - 1:
                raise ValueError(
                    f"node type {node_type!r}: the owned ids are not a contiguous range; "
                    "pass the owner of every node"
                )
            slot[self.start : self.end] = rows
        else:
            slot[ids.to(device)] = rows
            self.own_slot = torch.full((num_nodes,), -1, dtype=torch.int64)
            self.own_slot[ids] = torch.arange(owned)
        self._placed = (tiers, slot)
        """The rows and the slot map, swapped together: a reader sees one placement."""
        self.num_cached = 0
        self._free = owned

    @classmethod
    def for_holder(
        cls,
        data: HolderData,
        num_nodes: int,
        device: torch.device,
        *,
        device_budget: int | None = None,
        capacity: int = 0,
    ) -> FeatureTable:
        """The table of a homogeneous holder: it owns the new ids ``[data.start, data.end)``."""
        return cls(
            data.features,
            torch.arange(data.start, data.end),
            num_nodes,
            device,
            device_budget=device_budget,
            capacity=capacity,
        )

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
        return self.num_nodes - self.num_owned

    @property
    def held(self) -> int:
        """Rows held: owned and cached."""
        return self._free

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

        ``hotness``: a score per node (pre-sampled access counts, in-degrees), or None to
        keep the owned rows' order. The host tier keeps every row; the slots of the hot
        ones point to their GPU copies from now on.
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
            "feature table%s: %d of %d rows (%.0f%%) on the GPU, %d read from pinned host memory",
            "" if self.node_type == NODE_TYPE else f" of {self.node_type}",
            cap,
            held,
            100.0 * cap / max(held, 1),
            held - cap,
        )

    def local_rows(self, ids: Tensor) -> Tensor:
        """Features of nodes this holder owns (ids on any device)."""
        ids = ids.to(self.device)
        if not self.tiered and self.owner is None:
            # a range table: index_select, a row gather faster than advanced indexing
            local = ids if self.start == 0 else ids - self.start
            return torch.index_select(self.tiers.device_rows, 0, local)
        tiers, slot = self._placed
        return tiers.gather(slot[ids])

    def owned_slots(self, ids: Tensor) -> Tensor:
        """The rows (host int64) of owned nodes ``ids`` (host); a ValueError names any this
        holder does not own. Checked on the host: no device read-back."""
        ids = ids.to("cpu", torch.int64)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes):
            raise ValueError(
                f"partition {self.partition} was asked for {self.node_type!r} ids outside "
                f"0..{self.num_nodes - 1}"
            )
        if self.own_slot is None:
            if ids.numel() and (int(ids.min()) < self.start or int(ids.max()) >= self.end):
                raise ValueError(
                    f"partition {self.partition} was asked for {self.node_type!r} rows it "
                    f"does not own (it owns [{self.start}, {self.end}))"
                )
            return ids - self.start
        slots = self.own_slot[ids]
        if bool((slots < 0).any()):
            raise ValueError(
                f"partition {self.partition} was asked for {self.node_type!r} rows it does not own"
            )
        return slots
