"""Which remote nodes a holder caches (GLT's hotness: pre-sampled access counts, ties by
degree) and filling the cache from their owners at start-up.

A holder of a typed store (:func:`load_typed_tables`) reads, per featured node type, the
rows that its partition owns, plus ``cache_ratio`` of the other partitions' rows, the
hottest by in-degree (over every edge type into the type), read once from the store's
memory-mapped files. With a cache ratio of 1 every row is at hand and no request is ever
sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from distgnn_api.feature_memory import shared_budgets
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.features.requests import FetchFn
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.rpc import wait_remote

log = logging.getLogger(__name__)


FETCH_CHUNK = 1 << 18
"""Most node ids per feature RPC while filling the cache."""


def fill_cache(
    table: FeatureTable,
    layout: HolderLayout,
    fetch: FetchFn,
    hot_ids: Tensor,
    *,
    chunk: int = FETCH_CHUNK,
    peer_name: Callable[[int], str] | None = None,
) -> None:
    """Fetch the features of ``hot_ids`` (remote nodes, hottest first) into the table.

    Only other holders are asked, and only for ids they own: never this holder itself
    (a process has no RPC channel to itself), never with an empty request.
    """
    hot_ids = hot_ids.to(torch.int64).cpu()
    own = (hot_ids >= table.start) & (hot_ids < table.end)
    hot_ids = hot_ids[~own]
    owners = layout.holder_of(hot_ids)
    table.reserve(int(hot_ids.numel()))
    name = peer_name or (lambda h: f"holder {h}")
    for h in range(layout.num_holders):
        mine = hot_ids[owners == h]
        if mine.numel() == 0:
            continue
        futures = [(c, fetch(h, c.clone())) for c in torch.split(mine, chunk)]
        for ids, fut in futures:
            table.add_cached(ids, wait_remote(fut, name(h)))
    _log_filled(table)


def fill_cache_from(
    table: FeatureTable,
    fetch_all: Callable[[Tensor, Callable[[Tensor, Tensor], None]], None],
    hot_ids: Tensor,
) -> None:
    """Fetch the features of ``hot_ids`` into the table with ``fetch_all(ids, sink)``, which
    hands ``sink`` the ids and rows chunk by chunk; called once, also with no ids (the
    feature exchange's fill: every rank takes part)."""
    hot_ids = hot_ids.to(torch.int64).cpu()
    hot_ids = hot_ids[(hot_ids < table.start) | (hot_ids >= table.end)]
    table.reserve(int(hot_ids.numel()))
    fetch_all(hot_ids, table.add_cached)
    _log_filled(table)


def _log_filled(table: FeatureTable) -> None:
    log.info(
        "feature cache: %d of %d remote nodes (%.0f%%)",
        table.num_cached,
        table.num_remote,
        100.0 * table.num_cached / max(table.num_remote, 1),
    )


def select_hot(
    counts: Tensor,
    degrees: Tensor | None,
    start: int,
    end: int,
    budget: int,
) -> Tensor:
    """The ``budget`` hottest remote nodes: by pre-sampled access count, ties by degree."""
    remote = torch.ones(int(counts.numel()), dtype=torch.bool)
    remote[start:end] = False
    return select_hot_among(counts, degrees, remote, budget)


def select_hot_among(counts: Tensor, degrees: Tensor | None, remote: Tensor, budget: int) -> Tensor:
    """The ``budget`` hottest of the nodes where ``remote`` is true (see :func:`select_hot`)."""
    if budget >= int(remote.sum()):
        return remote.nonzero().squeeze(1)
    score = counts.to(torch.float64).cpu()
    if degrees is not None:
        deg = degrees.to(torch.float64).cpu()
        score = score + deg / (deg.max().clamp(min=1.0) * 2.0)
    score[~remote] = -1.0
    return torch.topk(score, budget).indices


def presample_counts(
    sample: Callable[[Tensor], Tensor],
    seeds: Tensor,
    num_nodes: int,
    *,
    batch_size: int,
    max_batches: int,
    seed: int = 0,
    device: torch.device | None = None,
) -> Tensor:
    """How often each node appears in sampled batches of ``seeds`` (GLT's hotness).

    Counted on ``device`` (where the sampler puts its ids), returned on the host.
    """
    counts = torch.zeros(num_nodes, dtype=torch.int64, device=device)
    if seeds.numel() == 0 or max_batches <= 0:
        return counts.cpu()
    g = torch.Generator()
    g.manual_seed(seed)
    order = seeds[torch.randperm(seeds.numel(), generator=g)]
    for batch in torch.split(order, batch_size)[:max_batches]:
        ids = sample(batch).to(counts.device, torch.int64)
        counts += torch.bincount(ids, minlength=num_nodes)
    return counts.cpu()


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
