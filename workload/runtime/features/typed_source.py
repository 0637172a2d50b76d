"""Typed features of a holder: its own rows, a hot cache per node type, RPC for the rest.

:func:`load_typed_tables` reads, per featured node type, the rows that this holder's
partition owns from the typed store, plus ``cache_ratio`` of the other partitions' rows,
the hottest by in-degree (over every edge type into the type), read once from the store's
memory-mapped files. :class:`TypedFeatureSource` gathers the rows of any nodes of a type:
owned and cached rows from the table, the others from their owners over RPC
(:func:`~distgnn_workload.runtime.features.serving._serve_rows_of_type`). With a
cache ratio of 1 every row is at hand and no request is ever sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_api.feature_memory import shared_budgets
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.runtime.features.cache_policy import select_hot_among
from distgnn_workload.runtime.features.serving import _serve_rows_of_type
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.rpc import wait_remote

log = logging.getLogger(__name__)

TypedFetchFn = Callable[[int, str, Tensor], Future[Tensor]]
"""Start fetching the rows of ``ids`` (host int64) of a node type from holder ``h``."""


def rpc_typed_fetch(target_of_holder: Callable[[int], str]) -> TypedFetchFn:
    """Typed feature requests over RPC (host ids; rows come back in host memory)."""

    def fetch(holder: int, node_type: str, ids: Tensor) -> Future[Tensor]:
        fut: Future[Tensor] = rpc.rpc_async(
            target_of_holder(holder), _serve_rows_of_type, args=(node_type, ids.cpu())
        )
        return fut

    return fetch


def in_degrees(store: HeteroPartitionStore, node_type: str) -> Tensor:
    """Every node's in-degree over the edge types into ``node_type``."""
    deg = np.zeros(store.meta.node_counts[node_type], dtype=np.int64)
    for et in store.meta.edge_type_tuples:
        if et[2] == node_type:
            indptr, _ = store.topology(et)
            ptr = np.asarray(indptr, dtype=np.int64)
            deg += ptr[1:] - ptr[:-1]
    return torch.from_numpy(deg)


def load_typed_tables(
    store: HeteroPartitionStore,
    partition: int,
    cache_ratio: float,
    device: torch.device,
    dtype: torch.dtype = torch.float32,
    device_budget: int | None = None,
) -> dict[str, FeatureTable]:
    """Per featured node type: the rows ``partition`` owns plus its hot cache (see above).

    ``device_budget``: bytes of rows the GPU may hold in all, shared by the types in
    proportion to their tables; over it a type's rows stay in pinned host memory and the
    most-cited ones (by in-degree) go on the GPU."""
    m = store.meta
    mine = store.partition(partition)
    parts = {q: store.partition(q) for q in range(store.num_partitions) if q != partition}
    featured = [t for t in m.node_types if m.num_features[t] > 0]
    owners = {t: torch.from_numpy(np.asarray(store.owner(t), dtype=np.int64)) for t in featured}
    held = {}
    for t in featured:
        own = int((owners[t] == partition).sum())
        held[t] = own + round(cache_ratio * (int(owners[t].numel()) - own))
    table_bytes = {
        t: held[t] * m.num_features[t] * torch.empty((), dtype=dtype).element_size()
        for t in featured
    }
    shares = shared_budgets(device_budget, table_bytes)
    tables: dict[str, FeatureTable] = {}
    for t in featured:
        owner = owners[t]
        share = shares[t]
        table = FeatureTable(
            torch.from_numpy(np.array(mine.x[t], dtype=np.float32)).to(dtype),
            torch.from_numpy(np.array(mine.nodes[t], dtype=np.int64)),
            int(owner.numel()),
            device,
            node_type=t,
            owner=owner,
            partition=partition,
            device_budget=share,
            capacity=held[t],
        )
        budget = round(cache_ratio * table.num_remote)
        degrees = in_degrees(store, t) if budget > 0 or table.tiered else None
        if budget > 0:
            remote = owner != partition
            hot = select_hot_among(torch.zeros_like(owner), degrees, remote, budget)
            hot_owner = owner[hot]
            for q, part in parts.items():
                ids = hot[hot_owner == q].sort().values
                nodes = np.asarray(part.nodes[t])
                pos = np.searchsorted(nodes, ids.numpy())
                rows = np.asarray(part.x[t])[pos]
                table.add_cached(ids, torch.from_numpy(np.array(rows, dtype=np.float32)))
        table.place(degrees)
        log.info(
            "typed features of %s: %d owned rows, %d of %d remote rows cached (%.0f%%)",
            t,
            table.num_owned,
            table.num_cached,
            table.num_remote,
            100.0 * table.num_cached / max(table.num_remote, 1),
        )
        tables[t] = table
    return tables


def whole_tables(
    x: dict[str, Tensor], device: torch.device, dtype: torch.dtype = torch.float32
) -> dict[str, FeatureTable]:
    """Tables that hold every row of each featured type (``x``, rows by typed id), as one
    holder of a single partition would: gathers never fetch."""
    tables: dict[str, FeatureTable] = {}
    for t, rows in x.items():
        n = int(rows.shape[0])
        ids = torch.arange(n, dtype=torch.int64)
        tables[t] = FeatureTable(rows.to(dtype), ids, n, device, node_type=t)
    return tables


def held_bytes(tables: dict[str, FeatureTable]) -> int:
    """The bytes of featured rows a holder keeps (owned and cached)."""
    return sum(t.held * t.tiers.row_bytes for t in tables.values())


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
    """Gathers the rows of any nodes of a featured type (see the module docstring)."""

    def __init__(
        self,
        tables: dict[str, FeatureTable],
        fetch: TypedFetchFn | None = None,
        *,
        peer_name: Callable[[int], str] | None = None,
    ) -> None:
        self.tables = tables
        self.fetch = fetch
        self.peer_name = peer_name or (lambda h: f"holder {h}")
        self.stats = {t: TypedStats() for t in tables}
        self.fetched_rows = dict.fromkeys(tables, 0)
        """Rows fetched from their owners since the start, per node type."""
        self._lock = threading.Lock()

    def num_features(self, node_type: str) -> int:
        return self.tables[node_type].num_features

    def gather(self, node_type: str, ids: Tensor) -> Tensor:
        """The features of nodes ``ids`` (int64, type-local) of ``node_type``."""
        table = self.tables[node_type]
        ids = ids.to(table.device, torch.int64)
        slot = table.slot[ids]
        out = table.gather(slot.clamp(min=0))
        owner = table.owner
        lookups = 0
        if table.num_remote:
            assert owner is not None, "a table with remote rows has an owner map"
            lookups = int((owner[ids] != table.partition).sum())
        tier_rows = host_rows = 0
        if table.tiered:
            tier_rows = int((slot >= 0).sum())
            host_rows = int((slot >= table.tiers.split).sum())
        missing = (slot < 0).nonzero().squeeze(1)
        misses = int(missing.numel())
        if misses:
            if self.fetch is None:
                raise RuntimeError(f"{misses} rows of {node_type!r} are neither here nor fetchable")
            assert owner is not None
            owners = owner[ids[missing]]
            pending = []
            for h in torch.unique(owners).tolist():
                if h == table.partition:
                    raise RuntimeError(f"holder {h} has no row for some of its own nodes")
                pos = missing[owners == h]
                request = ids[pos].cpu().clone()
                pending.append((pos, h, self.fetch(int(h), node_type, request)))
            for pos, h, fut in pending:
                rows = wait_remote(fut, self.peer_name(int(h)))
                out[pos] = rows.to(out.device, out.dtype)
        with self._lock:
            s = self.stats[node_type]
            s.lookups += lookups
            s.hits += lookups - misses
            s.bytes_fetched += misses * table.num_features * out.element_size()
            s.tier_rows += tier_rows
            s.host_tier_rows += host_rows
            self.fetched_rows[node_type] += misses
        return out

    def take(self) -> dict[str, TypedStats]:
        """The counts per node type since the last call."""
        with self._lock:
            out = self.stats
            self.stats = {t: TypedStats() for t in self.tables}
        return out
