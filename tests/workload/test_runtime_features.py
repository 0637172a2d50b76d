"""The distributed feature source, its hot cache and hop-by-hop sampling, against references.

The RPC hop is replaced by a function answering from the owner's data in-process; real RPC
between processes is covered by the e2e tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.partition import PartitionStore, write_partitions
from distgnn_workload.runtime.distributed_sampler import HopByHopSampler
from distgnn_workload.runtime.features.cache_policy import fill_cache, presample_counts, select_hot
from distgnn_workload.runtime.features.layout import (
    HolderData,
    HolderLayout,
    group_by_key,
    load_holder,
    load_labels,
    split_ids,
)
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.features.requests import FetchFn
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.host_syncs import HostSyncCounter
from distgnn_workload.runtime.rpc import RemoteError
from distgnn_workload.sampling import NeighborSampler
from tests.support.futures import done
from tests.support.random_graph import random_graph

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    path: Path = tmp_path_factory.mktemp("store") / "p"
    return write_partitions(
        path, random_graph(300, 1500, 5, seed=0), 4, assignment=np.arange(300) % 4
    )


@pytest.fixture(scope="module")
def reference(store: PartitionStore) -> Tensor:
    """Every node's features in new ids."""
    return torch.from_numpy(np.concatenate([store.partition(p).features for p in range(4)]))


def _holder_table(
    store: PartitionStore, holder: int, holders: int
) -> tuple[HolderLayout, HolderData, FeatureTable]:
    """The layout of ``holders``, ``holder``'s rows, and its table (room for every row)."""
    layout = HolderLayout.from_store(store, holders)
    data = load_holder(store, holder, holders, CPU)
    return layout, data, FeatureTable.for_holder(data, 300, CPU)


def _fetcher(reference: Tensor, calls: list[int]) -> FetchFn:
    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        calls.append(int(ids.numel()))
        return done(reference[ids].clone())

    return fetch


def test_layout_owns_contiguous_ranges(store: PartitionStore) -> None:
    layout = HolderLayout.from_store(store, 2)
    assert layout.range_of(0) == (0, store.meta.offsets[2])
    ids = torch.arange(300)
    owners = layout.holder_of(ids)
    assert torch.equal(owners, (ids >= store.meta.offsets[2]).to(torch.int64))


def test_gather_matches_the_reference_with_remote_fetches(
    store: PartitionStore, reference: Tensor
) -> None:
    layout = HolderLayout.from_store(store, 2)
    data = load_holder(store, 0, 2, CPU)
    assert torch.equal(data.features, reference[data.start : data.end])
    calls: list[int] = []
    source = DistributedFeatureSource(
        FeatureTable.for_holder(data, 300, CPU), layout, _fetcher(reference, calls), holder=0
    )
    ids = torch.randint(0, 300, (500,))
    assert torch.equal(source.gather(ids), reference[ids])
    assert calls
    lookups, hits, fetched = source.stats.take()
    assert lookups == int(((ids < data.start) | (ids >= data.end)).sum())
    assert hits == 0
    assert fetched == lookups * 5 * 4


def test_a_partial_cache_serves_hits_and_fetches_the_rest(
    store: PartitionStore, reference: Tensor
) -> None:
    layout, data, table = _holder_table(store, 1, 2)
    calls: list[int] = []
    fetch = _fetcher(reference, calls)
    hot = torch.arange(0, 60)  # remote for holder 1
    fill_cache(table, layout, fetch, hot)
    assert table.num_cached == 60
    assert not table.complete
    calls.clear()
    source = DistributedFeatureSource(table, layout, fetch, holder=1)
    ids = torch.cat([torch.arange(0, 60), torch.arange(100, 120), torch.arange(200, 300)])
    assert torch.equal(source.gather(ids), reference[ids])
    lookups, hits, _ = source.stats.take()
    remote = ids[(ids < data.start) | (ids >= data.end)]
    assert lookups == remote.numel()
    assert hits == int((remote < 60).sum())
    assert sum(calls) == lookups - hits


def test_a_full_cache_needs_no_fetch(store: PartitionStore, reference: Tensor) -> None:
    layout, data, table = _holder_table(store, 0, 2)
    calls: list[int] = []
    fetch = _fetcher(reference, calls)
    hot = select_hot(torch.zeros(300, dtype=torch.int64), None, data.start, data.end, 10**6)
    fill_cache(table, layout, fetch, hot)
    assert table.complete
    calls.clear()
    ids = torch.randint(0, 300, (400,))
    source = DistributedFeatureSource(table, layout, fetch, holder=0)
    assert torch.equal(source.gather(ids), reference[ids])
    assert calls == []


def test_hot_selection_takes_the_most_sampled_remote_nodes() -> None:
    counts = torch.zeros(20, dtype=torch.int64)
    counts[[2, 3, 15, 17]] = torch.tensor([50, 40, 30, 1])
    degrees = torch.arange(20)
    hot = select_hot(counts, degrees, 0, 5, 3)
    assert set(hot.tolist()) == {15, 17, 19}  # 2 and 3 are local; ties broken by degree


def test_presampling_counts_what_the_sampler_touches(store: PartitionStore) -> None:
    indptr, indices = store.topology()
    sampler = NeighborSampler(np.array(indptr), np.array(indices), [3, 2], seed=0)
    seeds = split_ids(store, HolderLayout.from_store(store, 2), "train")[0]
    counts = presample_counts(
        lambda s: sampler.sample(s).node_ids, seeds, 300, batch_size=16, max_batches=4
    )
    assert int(counts[seeds].sum()) >= min(64, seeds.numel())
    assert int(counts.sum()) > int(counts[seeds].sum())
    assert counts.numel() == 300


def test_labels_cover_every_node(store: PartitionStore) -> None:
    labels = load_labels(store, CPU)
    assert labels.numel() == 300
    assert int(labels.max()) < 3


def test_hop_by_hop_sampling_is_valid_against_the_full_graph(store: PartitionStore) -> None:
    layout = HolderLayout.from_store(store, 2)
    owners = [load_holder(store, h, 2, CPU) for h in range(2)]
    parts = [NeighborSampler(d.indptr, d.indices, [4, 3], seed=h) for h, d in enumerate(owners)]

    def hop_fetch(holder: int, nodes: Tensor, fanout: int) -> Future[tuple[Tensor, Tensor]]:
        _, nbrs, counts = parts[holder]._sample_hop(nodes - owners[holder].start, fanout)
        return done((counts, nbrs))

    sampler = HopByHopSampler(owners[0], layout, [4, 3], hop_fetch, device=CPU, seed=1)
    indptr_np, indices_np = store.topology()
    indptr = torch.from_numpy(np.array(indptr_np))
    indices = torch.from_numpy(np.array(indices_np)).long()
    seeds = torch.tensor([0, 5, 160, 299, 75])
    hop = sampler.sample(seeds)
    assert torch.equal(hop.node_ids[:5], seeds)
    assert torch.unique(hop.node_ids).numel() == hop.node_ids.numel()
    src = hop.node_ids[hop.edge_index[0]]
    dst = hop.node_ids[hop.edge_index[1]]
    for s, d in zip(src.tolist(), dst.tolist(), strict=True):
        assert s in indices[indptr[d] : indptr[d + 1]].tolist()
    # each target got min(degree, fanout) distinct neighbours
    targets = hop.num_nodes_per_hop[0]
    deg = indptr[seeds + 1] - indptr[seeds]
    got = torch.bincount(hop.edge_index[1][: hop.num_edges_per_hop[0]], minlength=targets)
    assert torch.equal(got, deg.clamp(max=4))
    ptr = hop.get_target_ptr()
    assert int(ptr[-1]) == hop.num_edges_per_hop[0] + hop.num_edges_per_hop[1]


def test_filling_the_cache_never_asks_this_holder_or_sends_empty_requests(
    store: PartitionStore, reference: Tensor
) -> None:
    """A request to itself needs a device map to itself, which CUDA RPC cannot have."""
    layout, data, table = _holder_table(store, 2, 4)
    asked: list[tuple[int, int]] = []

    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        asked.append((holder, int(ids.numel())))
        assert bool(
            ((ids >= layout.range_of(holder)[0]) & (ids < layout.range_of(holder)[1])).all()
        )
        return done(reference[ids].clone())

    # hot ids from holders 0 and 3 only, plus (wrongly) some of this holder's own nodes
    lo0, _ = layout.range_of(0)
    lo3, _ = layout.range_of(3)
    hot = torch.cat([torch.arange(lo0, lo0 + 5), torch.arange(data.start, data.start + 3)])
    hot = torch.cat([hot, torch.arange(lo3, lo3 + 4)])
    fill_cache(table, layout, fetch, hot, chunk=2)
    assert asked
    assert all(h in (0, 3) and n > 0 for h, n in asked)
    assert sum(n for _, n in asked) == 9
    assert table.num_cached == 9
    ids = torch.cat([torch.arange(lo0, lo0 + 5), torch.arange(lo3, lo3 + 4)])
    assert torch.equal(table.gather(table.slot[ids]), reference[ids])


def test_a_started_gather_sends_only_missing_ids_at_once_and_fills_them_on_wait(
    store: PartitionStore, reference: Tensor
) -> None:
    layout, _, table = _holder_table(store, 1, 4)
    hot = torch.arange(*layout.range_of(0))[:10]
    fill_cache(table, layout, _fetcher(reference, []), hot)
    sent: dict[int, tuple[Tensor, Future[Tensor]]] = {}

    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        assert holder not in sent, "one request per holder and gather"
        fut: Future[Tensor] = Future()
        sent[holder] = (ids, fut)
        return fut

    source = DistributedFeatureSource(table, layout, fetch, holder=1, peer_name=lambda h: f"p{h}")
    ids = torch.randperm(300, generator=torch.Generator().manual_seed(1))[:120]
    pending = source.start(ids)
    # requests went out before anyone waits, with exactly the ids that have no row here
    missing = ids[table.slot[ids] < 0]
    assert sum(int(i.numel()) for i, _ in sent.values()) == missing.numel()
    assert set(torch.cat([i for i, _ in sent.values()]).tolist()) == set(missing.tolist())
    assert 1 not in sent
    for requested, fut in sent.values():
        fut.set_result(reference[requested].clone())
    assert torch.equal(pending.wait(), reference[ids])
    _, hits, fetched = source.stats.take()
    assert hits == int((ids < 10).sum())
    assert fetched == missing.numel() * 5 * 4


def test_a_failed_fetch_names_the_peer(store: PartitionStore) -> None:
    layout = HolderLayout.from_store(store, 2)
    data = load_holder(store, 0, 2, CPU)

    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        fut: Future[Tensor] = Future()
        fut.set_exception(RuntimeError("eof"))  # type: ignore[arg-type]
        return fut

    source = DistributedFeatureSource(
        FeatureTable.for_holder(data, 300, CPU),
        layout,
        fetch,
        holder=0,
        peer_name=lambda h: f"trainer-{h}",
    )
    with pytest.raises(RemoteError, match="trainer-1 failed: eof"):
        source.gather(torch.arange(290, 300))


@pytest.mark.parametrize("buckets", [5, 300, 40_000])
def test_grouping_by_key_is_stable_counts_every_key_and_reads_nothing_back(buckets: int) -> None:
    gen = torch.Generator().manual_seed(buckets)
    # the top keys never occur: their counts must still be there, as zeros
    key = torch.randint(0, max(buckets - 2, 1), (5_000,), generator=gen)
    with HostSyncCounter() as syncs:
        order, counts = group_by_key(key, buckets)
    assert syncs.count == 0, syncs.summary()
    assert torch.equal(order, torch.argsort(key, stable=True))
    assert torch.equal(counts, torch.bincount(key, minlength=buckets))
    assert counts.dtype == torch.int64


@pytest.mark.gpu
def test_grouping_by_key_on_the_gpu_does_not_sync() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    key = torch.randint(0, 4, (100_000,), device="cuda")
    group_by_key(key, 5)  # warm-up: allocations
    torch.cuda.set_sync_debug_mode("error")
    try:
        order, counts = group_by_key(key, 5)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(counts.cpu(), torch.bincount(key.cpu(), minlength=5))
    assert torch.equal(order.cpu(), torch.argsort(key.cpu(), stable=True))
