"""Which remote nodes a holder caches (GLT's hotness: pre-sampled access counts, ties by
degree) and filling the cache from their owners at start-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import Tensor

from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.features.remote import FetchFn
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
