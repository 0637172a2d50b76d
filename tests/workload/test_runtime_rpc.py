"""RPC plumbing without processes: device maps, remote errors, and the sampler server's pool.

Real RPC between processes is covered by ``tests/e2e/test_workload_rpc.py`` and the e2e jobs.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor
from torch.futures import Future

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_workload.partition import PartitionStore, write_partitions
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime.distributed_sampler import replicated_factory
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.features.remote import DistributedFeatureSource
from distgnn_workload.runtime.remote_batches import RemotePipeline
from distgnn_workload.runtime.rpc import (
    RemoteError,
    RpcContext,
    check_remote,
    device_maps,
    wait_remote,
)
from distgnn_workload.runtime.wire import WireBatch, unpack
from distgnn_workload.sampler.server import SamplerServer
from distgnn_workload.sampling import NeighborSampler
from tests.support.random_graph import random_graph

CPU = torch.device("cpu")
FANOUTS = [4, 3]


def test_device_maps_cover_every_pair_both_ways_and_never_self() -> None:
    devices = {
        "trainer-0": "cuda:0",
        "trainer-1": "cuda:1",
        "sampler-0": "cuda:0",
        "sampler-1": "cuda:1",
    }
    maps = {name: device_maps(name, devices) for name in devices}
    for me, mine in maps.items():
        assert me not in mine, "a process must not map (or call) itself"
        assert set(mine) == set(devices) - {me}
    for a, b in itertools.permutations(devices, 2):
        # a's request to b, and b's response to a (the inverse of a's map to b)
        assert maps[a][b] == {torch.device(devices[a]): torch.device(devices[b])}
        response = {v: k for k, v in maps[a][b].items()}
        assert response == {torch.device(devices[b]): torch.device(devices[a])}
        assert maps[b][a] == response


def test_a_remote_error_names_the_peer_and_keeps_the_traceback() -> None:
    try:
        raise ValueError("bad seeds")
    except ValueError as err:
        remote = RemoteError.of(err, "sampler-3")
    assert "sampler-3 failed: ValueError: bad seeds" in str(remote)
    assert "Traceback" in str(remote)
    with pytest.raises(RemoteError, match="sampler-3 failed"):
        check_remote(remote, "sampler-3")
    # torch RPC returns an exception set on an async_execution future as a value
    with pytest.raises(RemoteError, match="sampler-1 failed: KeyError"):
        check_remote(KeyError("x"), "sampler-1")
    assert check_remote((1, 2), "sampler-1") == (1, 2)
    failed: Future[int] = Future()
    failed.set_exception(RuntimeError("connection reset"))  # type: ignore[arg-type]
    with pytest.raises(RemoteError, match="trainer-1 failed: connection reset"):
        wait_remote(failed, "trainer-1")


# --------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    path: Path = tmp_path_factory.mktemp("store") / "p"
    return write_partitions(
        path,
        random_graph(200, 1200, 4, seed=0, cuts=(0.6, 0.8)),
        1,
        assignment=np.zeros(200, dtype=np.int64),
    )


def _spec(concurrency: int) -> DistGNNJobSpec:
    return parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": 200, "numEdges": 600}},
            "samplers": {"replicas": 1, "concurrency": concurrency, "cacheRatio": 1.0},
            "trainers": {"replicas": 1},
            "model": {"numLayers": 2, "fanout": FANOUTS},
            "training": {"batchSize": 16},
        }
    )


class _GuardedSampler(NeighborSampler):
    """Fails loudly when two threads use one instance at once (it is not thread-safe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.busy = threading.Lock()
        self.prepared: list[int] = []
        self.uses = 0

    def prepare(self, batch_size: int, *, excluding: bool = False) -> None:
        self.prepared.append(batch_size)
        super().prepare(batch_size, excluding=excluding)

    def sample(self, seeds: Tensor, exclude: Tensor | None = None) -> Any:
        if not self.busy.acquire(blocking=False):
            raise AssertionError("one sampler used by two threads at once")
        try:
            self.uses += 1
            time.sleep(0.002)  # widen the window a shared instance would be caught in
            return super().sample(seeds, exclude)
        finally:
            self.busy.release()


def _server(
    store: PartitionStore, concurrency: int, *, fail: bool = False
) -> tuple[SamplerServer, list[_GuardedSampler]]:
    spec = _spec(concurrency)
    state = holders.load(store, spec, 0, 1, CPU)
    base = replicated_factory(store, FANOUTS, CPU)
    made: list[_GuardedSampler] = []

    def new_sampler(seed: int) -> NeighborSampler:
        template = base(seed)
        sampler = _GuardedSampler(template.indptr, template.indices, FANOUTS, seed=seed)
        if fail:
            sampler.sample = _broken  # type: ignore[method-assign]
        made.append(sampler)
        return sampler

    features = DistributedFeatureSource(
        state.table, HolderLayout.from_store(store, 1), lambda h, ids: Future(), holder=0
    )
    holder = holders.Holder(state=state, features=features, new_sampler=new_sampler)
    ctx = RpcContext(None, CPU, cuda=False)  # type: ignore[arg-type]
    server = SamplerServer(
        holder, ctx, rank=3, concurrency=concurrency, seed=5, batch_size=spec.training.batch_size
    )
    return server, made


def _broken(seeds: Tensor, exclude: Tensor | None = None) -> Any:
    raise IndexError(f"node {int(seeds.max()) + 10**6} is out of range")


def test_the_server_builds_and_prepares_its_pool_before_any_request(
    store: PartitionStore,
) -> None:
    server, made = _server(store, 3)
    assert len(made) == 3
    assert [s.prepared for s in made] == [[16], [16], [16]]
    server.executor.shutdown()


def test_concurrent_requests_never_share_a_sampler_and_are_valid(store: PartitionStore) -> None:
    server, made = _server(store, 4)
    indptr, indices = store.topology()
    neighbours = [set(indices[indptr[v] : indptr[v + 1]].tolist()) for v in range(200)]
    gen = torch.Generator().manual_seed(0)
    requests = [torch.randperm(200, generator=gen)[:16] for _ in range(40)]
    futures = [server.submit(seeds) for seeds in requests]
    for seeds, fut in zip(requests, futures, strict=True):
        batch = unpack(check_remote(fut.wait(), "sampler-3"), CPU)
        hop = batch.hop
        assert torch.equal(hop.seed_ids, seeds)
        ids = hop.node_ids.tolist()
        src, dst = hop.edge_index.tolist()
        for s, d in zip(src, dst, strict=True):
            assert ids[s] in neighbours[ids[d]]
        assert torch.equal(batch.x, server.holder.state.table.local_rows(hop.node_ids))
    server.executor.shutdown()
    assert len(made) == 4, "samplers are made up front, not per request"
    assert sum(s.uses for s in made) == 40


def test_a_failed_request_reaches_the_trainer_as_an_error_naming_the_sampler(
    store: PartitionStore,
) -> None:
    server, _ = _server(store, 2, fail=True)
    value = server.submit(torch.arange(16)).wait()
    assert isinstance(value, RemoteError)
    assert "sampler-3 failed: IndexError" in str(value)
    assert "_broken" in str(value), "the sampler's traceback travels with the error"

    def request(holder: int, seeds: Tensor) -> Future[WireBatch]:
        return server.submit(seeds)

    pipeline = RemotePipeline(request, device=CPU, prefetch=1, concurrency=2)
    batches = [(0, torch.arange(16)), (0, torch.arange(16, 32))]
    loader: Iterator[Any] = iter(pipeline.epoch(batches))
    with pytest.raises(RemoteError, match="sampler-3 failed: IndexError"):
        next(loader)  # before: TypeError, the error object used as a mini-batch
    server.executor.shutdown()
