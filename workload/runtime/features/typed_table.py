"""The feature table of one node type on one holder of a typed store, and serving its rows.

A typed store assigns every node of a type to an owning partition (``owner``), in no
particular id order, so a typed table addresses rows through a ``slot`` map over the type's
ids, as :class:`~distgnn_workload.runtime.features.table.FeatureTable` does over a range:
the owned rows first, cached rows of other partitions after; -1 where a row must be
fetched from its owner. Over a GPU budget (``device_budget``) the rows live in pinned
host memory and :meth:`~TypedFeatureTable.place` copies the hottest to the GPU, as a
:class:`~distgnn_workload.runtime.features.table.FeatureTable` does. Other holders ask for owned rows through :func:`serve_typed_tables`
(one registered target, requests keyed by node type).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import torch
from torch import Tensor

from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.features.tiers import TieredRows, own_rows, place_hot
from distgnn_workload.runtime.rpc_targets import Target
from distgnn_workload.runtime.transfers import to_device, to_host

log = logging.getLogger(__name__)


class TypedFeatureTable:
    """The rows of one node type that a holder has: its own, then cached ones."""

    def __init__(
        self,
        node_type: str,
        owner: Tensor,
        partition: int,
        owned_ids: Tensor,
        owned_rows: Tensor,
        device: torch.device,
        *,
        device_budget: int | None = None,
        capacity: int = 0,
    ) -> None:
        """``device_budget``: bytes of rows the GPU may hold (None: all of them);
        ``capacity``: rows to make room for (owned plus the cache to come)."""
        n = int(owner.numel())
        if owned_rows.shape[0] != owned_ids.numel():
            raise ValueError(
                f"node type {node_type!r}: {owned_rows.shape[0]} rows for "
                f"{owned_ids.numel()} owned nodes"
            )
        self.node_type = node_type
        self.partition = partition
        self.device = device
        self.owner = owner.to(device, torch.int64)
        self.num_nodes = n
        self.num_owned = int(owned_ids.numel())
        self.num_features = int(owned_rows.shape[1])
        self.device_budget = device_budget
        ids = owned_ids.to("cpu", torch.int64).clone()
        self.tiers, self.row_ids, self.tiered = own_rows(
            owned_rows, ids, capacity, device_budget, device
        )
        """``row_ids``: the typed id of each held row (placement ranks them by hotness)."""
        self.slot = torch.full((n,), -1, dtype=torch.int32, device=device)
        self.slot[owned_ids.to(device, torch.int64)] = torch.arange(
            self.num_owned, dtype=torch.int32, device=device
        )
        self.own_slot = torch.full((n,), -1, dtype=torch.int64)
        """The row of each owned node, -1 elsewhere, on the host (for serving)."""
        self.own_slot[owned_ids.to("cpu", torch.int64)] = torch.arange(self.num_owned)
        self.num_cached = 0

    @property
    def num_remote(self) -> int:
        return self.num_nodes - self.num_owned

    @property
    def dtype(self) -> torch.dtype:
        return self.tiers.dtype

    @property
    def held(self) -> int:
        """Rows held: owned and cached."""
        return self.num_owned + self.num_cached

    def gather(self, slot: Tensor) -> Tensor:
        """The rows at ``slot`` (valid slots, on the table's device), from either tier."""
        return self.tiers.gather(slot)

    @property
    def complete(self) -> bool:
        """Every node has a row: gathers need no RPC."""
        return self.num_cached >= self.num_remote

    def add_cached(self, ids: Tensor, rows: Tensor) -> None:
        """Keep ``rows`` as the features of the other partitions' nodes ``ids``."""
        n = int(ids.numel())
        if n == 0:
            return
        base = self.held
        if self.tiered:
            host = self.tiers.host_rows
            assert host is not None
            if base + n > host.shape[0]:
                raise ValueError(
                    f"node type {self.node_type!r}: {base + n} rows do not fit the "
                    f"{host.shape[0]} the tiered table made room for"
                )
            host[base : base + n] = rows.to("cpu", self.dtype)
            self.row_ids[base : base + n] = ids.to("cpu", torch.int64)
        else:
            rows = rows.to(self.device, self.dtype)
            self.tiers = TieredRows(torch.cat([self.tiers.device_rows, rows]))
        self.slot[ids.to(self.device, torch.int64)] = torch.arange(
            base, base + n, dtype=torch.int32, device=self.device
        )
        self.num_cached += n

    def place(self, hotness: Tensor | None) -> None:
        """Copy the hottest held rows, up to the GPU budget, to the GPU (a tiered table);
        ``hotness``: a score per typed id. Before the table is served: slots and rows
        change together here."""
        if not self.tiered:
            return
        assert self.device_budget is not None
        held = self.held
        ids = self.row_ids[:held]
        score = None if hotness is None else hotness.to("cpu")[ids]
        placed, slot = place_hot(self.tiers, held, self.device_budget, score, self.device)
        self.slot[ids.to(self.device)] = slot.to(self.device)
        self.tiers = placed
        log.info(
            "typed features of %s: %d of %d rows on the GPU, the rest in pinned host memory",
            self.node_type,
            placed.split,
            held,
        )

    def owned_slots(self, ids: Tensor) -> Tensor:
        """The rows (host int64) of owned nodes ``ids`` (host); a ValueError names any
        this holder does not own. Checked on the host: no device read-back."""
        ids = ids.to("cpu", torch.int64)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.num_nodes):
            raise ValueError(
                f"partition {self.partition} was asked for {self.node_type!r} ids outside "
                f"0..{self.num_nodes - 1}"
            )
        slots = self.own_slot[ids]
        if bool((slots < 0).any()):
            raise ValueError(
                f"partition {self.partition} was asked for {self.node_type!r} rows it does not own"
            )
        return slots


SERVED_TYPED_TABLES = Target[dict[str, TypedFeatureTable]]("typed feature tables")
TYPED_SERVE_OBSERVER = Target[Callable[[str, Tensor], None]]("typed feature request observer")


def set_typed_serve_observer(observer: Callable[[str, Tensor], None]) -> None:
    """Call ``observer(node_type, rows)`` for every typed feature request answered (metrics)."""
    rpc_targets.register(TYPED_SERVE_OBSERVER, observer)


def serve_typed_tables(tables: dict[str, TypedFeatureTable]) -> None:
    """Make this process answer other holders' requests for its owned typed rows."""
    rpc_targets.register(SERVED_TYPED_TABLES, tables)


def _serve_typed_features(node_type: str, ids: Tensor) -> Tensor:
    """RPC target: the features of owned nodes ``ids`` of ``node_type``, in host memory.

    On a GPU table the slots go to the device through pinned memory and the rows are
    gathered on a side stream of this RPC thread and copied back to pinned memory, so the
    copy waits for nothing but the gather (:mod:`distgnn_workload.runtime.transfers`).
    """
    tables = rpc_targets.get(SERVED_TYPED_TABLES)
    table = tables.get(node_type)
    if table is None:
        raise KeyError(
            f"this process serves no features of node type {node_type!r} "
            f"(it serves {sorted(tables)})"
        )
    table.owned_slots(ids)  # every id is owned, or a ValueError names the request
    observer = rpc_targets.find(TYPED_SERVE_OBSERVER)
    if table.device.type != "cuda":
        rows = table.gather(table.slot[ids.to(torch.int64)])
        if observer is not None:
            observer(node_type, rows)
        return rows
    # a new RPC thread starts on GPU 0: anything it created there would open a second context
    torch.cuda.set_device(table.device)
    stream: torch.cuda.Stream | None = getattr(_serve_streams, "stream", None)
    if stream is None:
        stream = torch.cuda.Stream(table.device)  # type: ignore[no-untyped-call]
        _serve_streams.stream = stream
    with torch.cuda.stream(stream):
        rows = to_host(table.gather(table.slot[to_device(ids.to(torch.int64), table.device)]))
    if observer is not None:
        observer(node_type, rows)
    return rows


_serve_streams = threading.local()
