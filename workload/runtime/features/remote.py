"""Features of any nodes for the loader: local rows, cached rows, and the rest from their
owners, overlapped with sampling: over the trainers' feature exchange (collectives, worker
mode: :mod:`~distgnn_workload.runtime.features.exchange`), or by requests over RPC or into
shared slots (between sampler servers; the requests are made in
:mod:`~distgnn_workload.runtime.features.requests`). A holder of several node types has one
source per type (:class:`TypedFeatureSource`), whose tables say the owner of each node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.data.graph import NODE_TYPE
from distgnn_workload.runtime.features.exchange import FeatureExchange
from distgnn_workload.runtime.features.layout import HolderLayout, group_by_key
from distgnn_workload.runtime.features.pending import FeatureStats, PendingGather, RemotePart
from distgnn_workload.runtime.features.requests import FetchFn, TypedFetchFn
from distgnn_workload.runtime.features.serving import FEATURE_SLOTS
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.shared_slots import SlotReader

log = logging.getLogger(__name__)


class DistributedFeatureSource:
    """Gathers features of any nodes: local rows, cached rows, and the rest from their owners.

    Implements the loader's ``FeatureSource`` protocol (``gather``, ``num_features``).
    :meth:`start` splits a gather in two so that a pipeline can sample the next batches
    while the remote rows of this one are on their way: it takes one host sync (how many
    rows each holder must send) and asks each holder for only the missing ids. With an
    ``exchange`` every gather is one round of it (even one that misses nothing) and
    :meth:`finish_phase` ends the pipeline's phase; without one, requests go over RPC.
    """

    def __init__(
        self,
        table: FeatureTable,
        layout: HolderLayout | None,
        fetch: FetchFn,
        *,
        holder: int,
        peer_name: Callable[[int], str] | None = None,
    ) -> None:
        """``layout``: the holders' id ranges, or None where the table has an owner map
        or owns every row."""
        if layout is None and table.owner is None and table.num_remote:
            raise ValueError(
                f"the feature source of {table.node_type!r} needs a holder layout or a "
                "table with an owner map: the table does not own every row"
            )
        self.table = table
        self.layout = layout
        self.num_holders = layout.num_holders if layout is not None else _num_holders(table)
        self.fetch = fetch
        self.holder = holder
        self.peer_name = peer_name or (lambda h: f"holder {h}")
        self.device = table.device
        self.stats = FeatureStats(lookups=torch.zeros((), dtype=torch.int64, device=table.device))
        self._stats_lock = threading.Lock()
        self.readers: dict[int, SlotReader] = {}
        """Shared slots of holders on this host, by holder: their rows come through memory."""
        self.fetch_into: Callable[[int, int, Tensor], Future[int]] | None = None
        """Ask holder ``h`` to write the rows of ``ids`` into slot ``k`` of this process."""
        self.exchange: FeatureExchange | None = None
        """The trainers' feature exchange, when some rank misses rows (see :meth:`use`)."""
        # the holders' inner bounds, kept on the device: no copy of them per batch
        self._inner_bounds: Tensor | None = None
        """None where the table's owner map says who owns a row."""
        if layout is not None:
            self._inner_bounds = layout.bounds[1:-1].to(table.device)
        elif table.owner is None:  # one holder owns every row
            self._inner_bounds = torch.zeros(0, dtype=torch.int64, device=table.device)

    def _owner_of(self, ids: Tensor) -> Tensor:
        """The owning holder of each id (``HolderLayout.holder_of`` on the device's bounds,
        or the table's owner map)."""
        if self._inner_bounds is None:
            assert self.table.owner is not None
            return self.table.owner[ids]
        return torch.bucketize(ids, self._inner_bounds, right=True)

    def use(self, exchange: FeatureExchange) -> None:
        """Fetch over ``exchange`` from now on if any rank's table is incomplete (a
        collective: every rank calls it)."""
        if exchange.any_rank(not self.table.complete):
            self.exchange = exchange
            # every holder of the job, also one that owns no row of this table's type
            self.num_holders = exchange.num_holders
        log.info(
            "remote feature rows%s: %s",
            "" if self.table.node_type == NODE_TYPE else f" of {self.table.node_type!r}",
            "over the feature exchange" if self.exchange is not None else "none (all cached)",
        )

    @property
    def moved_bytes(self) -> int:
        """Bytes this rank pulled from its peers since the start (rows, and ids sent)."""
        if self.exchange is not None:
            return self.exchange.moved.total_in
        return self.stats.total_bytes

    def finish_phase(self) -> None:
        """After the last gather of a phase: serve the peers until every rank is done."""
        if self.exchange is not None:
            self.exchange.finish_phase()

    @property
    def num_features(self) -> int:
        return self.table.num_features

    def gather(self, node_ids: Tensor) -> Tensor:
        return self.start(node_ids).wait()

    def start(self, node_ids: Tensor) -> PendingGather:
        """Gather the rows at hand and send for the others (see :class:`PendingGather`)."""
        table = self.table
        ids = node_ids.to(self.device, torch.int64)
        if table.num_remote == 0 and not table.tiered and self.exchange is None:
            return PendingGather(table.local_rows(ids))  # one holder owns every node
        slot = table.slot[ids]
        owner = self._owner_of(ids)
        with self._stats_lock:
            self.stats.lookups += (owner != self.holder).sum()
            if table.tiered:
                self.stats.count_tiers(slot, table.tiers.split)
        if self.exchange is not None:
            return self._start_exchange(ids, slot, owner)
        if table.complete:
            return PendingGather(table.gather(slot))
        out = self._held_rows(slot)
        holders = self.num_holders
        # misses keyed by their owner, the rest after them: one sort, one host sync
        order, counts_t = group_by_key(torch.where(slot < 0, owner, holders), holders + 1)
        counts = counts_t.tolist()
        misses = sum(counts[:holders])
        if misses == 0:
            return PendingGather(out)
        order = order[:misses]
        miss_ids = ids[order]
        if self.readers:
            miss_ids = miss_ids.cpu()  # requests carry host ids; rows come through the slots
        pending = PendingGather(out)
        lo = 0
        for h, n in enumerate(counts[:holders]):
            if not n:
                continue
            if h == self.holder:
                raise RuntimeError(f"holder {h} has no row for some of its own nodes")
            pos = order[lo : lo + n]
            # a compact copy: a view would put its whole storage on the wire
            request = miss_ids[lo : lo + n].clone()
            reader = self.readers.get(h)
            if reader is not None and self.fetch_into is not None and n <= _slot_rows(reader):
                k = reader.acquire()
                fut: Future[Any] = self.fetch_into(h, k, request)
                pending.parts.append(RemotePart(pos, fut, self.peer_name(h), reader, k))
            else:
                pending.parts.append(RemotePart(pos, self.fetch(h, request), self.peer_name(h)))
            lo += n
        with self._stats_lock:
            self.stats.misses += misses
            fetched = misses * table.num_features * out.element_size()
            self.stats.bytes_fetched += fetched
            self.stats.total_bytes += fetched
        return pending

    def _start_exchange(self, ids: Tensor, slot: Tensor, owner: Tensor) -> PendingGather:
        """Start one round of the exchange (on its thread): the missing rows, grouped by
        owner. No host sync here: the round reads the counts back on its thread."""
        exchange = self.exchange
        assert exchange is not None
        table = self.table
        holders = self.num_holders
        if table.complete:  # nothing to ask, but the peers may ask this rank
            none = torch.zeros(holders, dtype=torch.int64, device=ids.device)
            started = exchange.start_round(ids[:0], none)
            return PendingGather(table.gather(slot), exchanged=(ids[:0], started))
        out = self._held_rows(slot)
        # misses keyed by their owner, the rest after them
        order, counts = group_by_key(torch.where(slot < 0, owner, holders), holders + 1)
        started = exchange.start_round(ids[order], counts[:holders])
        row_bytes = table.num_features * out.element_size()
        return PendingGather(
            out, exchanged=(order, started), on_exchanged=lambda n: self._count_misses(n, row_bytes)
        )

    def _held_rows(self, slot: Tensor) -> Tensor:
        """The held rows at ``slot``, any row where none is held (filled in on ``wait()``);
        zeros from a table that holds none (a partition without rows of its type)."""
        table = self.table
        if table.held == 0:
            return torch.zeros(
                (slot.numel(), table.num_features), dtype=table.dtype, device=slot.device
            )
        return table.gather(slot.clamp(min=0))

    def _count_misses(self, misses: int, row_bytes: int) -> None:
        with self._stats_lock:
            self.stats.misses += misses
            self.stats.bytes_fetched += misses * row_bytes
            self.stats.total_bytes += misses * row_bytes


def _slot_rows(reader: SlotReader) -> int:
    return int(reader.buffers(0)[FEATURE_SLOTS].size(0))


@dataclass
class TypedStats:
    """Remote-row look-ups of one node type, and those the cache served."""

    lookups: int = 0
    hits: int = 0
    bytes_fetched: int = 0
    tier_rows: int = 0
    """Rows a tiered table gathered ..."""
    host_tier_rows: int = 0
    """... and those of them read from its pinned host tier."""


class TypedFeatureSource:
    """One :class:`DistributedFeatureSource` per featured node type of a holder, fetching
    by node type over ``fetch`` (None: every row must be at hand), or, once :meth:`use` has
    given it one exchange per type, over the trainers' feature exchange (worker mode)."""

    def __init__(
        self,
        tables: dict[str, FeatureTable],
        fetch: TypedFetchFn | None = None,
        *,
        peer_name: Callable[[int], str] | None = None,
    ) -> None:
        self.tables = tables
        self.sources = {
            t: DistributedFeatureSource(
                table,
                None,
                _fetch_of_type(t, fetch),
                holder=table.partition,
                peer_name=peer_name,
            )
            for t, table in tables.items()
        }

    def num_features(self, node_type: str) -> int:
        return self.tables[node_type].num_features

    def gather(self, node_type: str, ids: Tensor) -> Tensor:
        """The features of nodes ``ids`` (int64, type-local) of ``node_type``."""
        return self.sources[node_type].gather(ids)

    def start(self, node_type: str, ids: Tensor) -> PendingGather:
        """:meth:`gather` split in two: the rows at hand now, the remote ones on ``wait()``."""
        return self.sources[node_type].start(ids)

    @property
    def exchanged(self) -> bool:
        """Whether some type's rows come over the feature exchange."""
        return any(s.exchange is not None for s in self.sources.values())

    def use(self, exchanges: Mapping[str, FeatureExchange]) -> None:
        """Fetch each type's remote rows over its exchange from now on, where some rank
        misses rows of that type (collectives: every rank calls it, with the same types)."""
        for t, source in self.sources.items():
            source.use(exchanges[t])

    def finish_phase(self) -> None:
        """After the last gather of a phase: serve the peers until every rank is done, on
        every type's exchange at once (a peer may still need one type's rounds while this
        rank waits in another's)."""
        started = [s.exchange.start_finish() for s in self.sources.values() if s.exchange]
        for finishing in started:
            finishing.result()

    @property
    def moved_bytes(self) -> int:
        """Bytes this rank pulled from its peers since the start, all types (rows, and ids
        sent)."""
        return sum(s.moved_bytes for s in self.sources.values())

    @property
    def fetched_rows(self) -> dict[str, int]:
        """Rows fetched from their owners since the start, per node type."""
        return {
            t: s.stats.total_bytes // max(s.table.tiers.row_bytes, 1)
            for t, s in self.sources.items()
        }

    def take(self) -> dict[str, TypedStats]:
        """The counts per node type since the last call (a host sync per type)."""
        out = {}
        for t, s in self.sources.items():
            with s._stats_lock:
                lookups, hits, fetched = s.stats.take()
                tier_rows, host_rows = s.stats.take_tiers()
            out[t] = TypedStats(lookups, hits, fetched, tier_rows, host_rows)
        return out


def _num_holders(table: FeatureTable) -> int:
    """The holders that own the rows of ``table``: one past the highest owner."""
    if table.owner is None or table.owner.numel() == 0:
        return table.partition + 1
    return int(table.owner.max()) + 1


def _fetch_of_type(node_type: str, fetch: TypedFetchFn | None) -> FetchFn:
    def fetch_rows(holder: int, ids: Tensor) -> Future[Tensor]:
        if fetch is None:
            raise RuntimeError(
                f"{int(ids.numel())} rows of {node_type!r} are neither here nor fetchable"
            )
        return fetch(holder, node_type, ids)

    return fetch_rows
