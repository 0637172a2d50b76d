"""Samplers used from several threads: one CUDA graph capture at a time, and a failed
capture leaves a sampler that still samples correctly (with a fresh random stream)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch

from distgnn_workload.sampling import NeighborSampler

FANOUTS = [4, 3]


def _graph(n: int = 300, m: int = 3000, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, n, (m,), generator=g)
    src = torch.randint(0, n, (m,), generator=g)
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    return indptr, src[order].to(torch.int32)


def _check(sampler: NeighborSampler, seeds: torch.Tensor) -> None:
    indptr, indices = sampler.indptr.cpu(), sampler.indices.cpu()
    hop = sampler.sample(seeds).to("cpu")
    assert torch.equal(hop.seed_ids, seeds.cpu())
    ids = hop.node_ids
    for s, d in zip(hop.edge_index[0].tolist(), hop.edge_index[1].tolist(), strict=True):
        v = int(ids[d])
        assert int(ids[s]) in indices[indptr[v] : indptr[v + 1]].tolist()
    first = hop.edge_index[1][: hop.num_edges_per_hop[0]]
    deg = indptr[seeds.cpu() + 1] - indptr[seeds.cpu()]
    assert torch.equal(torch.bincount(first, minlength=seeds.numel()), deg.clamp(max=FANOUTS[0]))


def test_captures_from_several_threads_run_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    indptr, indices = _graph()
    samplers = [
        NeighborSampler(indptr, indices, FANOUTS, device="cpu", seed=k, static_shapes=True)
        for k in range(4)
    ]
    inside = 0
    most = 0
    guard = threading.Lock()

    def slow_failing_capture(
        key: object, padded: torch.Tensor, num_seeds: int, extra: torch.Tensor | None
    ) -> Any:
        nonlocal inside, most
        with guard:
            inside += 1
            most = max(most, inside)
        time.sleep(0.05)
        with guard:
            inside -= 1
        raise RuntimeError("operation not permitted when stream is capturing")

    for s in samplers:
        s.cuda_graph = True  # as on CUDA
        monkeypatch.setattr(s, "_capture_locked", slow_failing_capture)
    old = [s.generator for s in samplers]

    def prepare_all() -> None:
        threads = [threading.Thread(target=s.prepare, args=(16,)) for s in samplers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    with pytest.warns(UserWarning, match="falling back to the dynamic execution"):
        prepare_all()
    assert most == 1
    for s, gen in zip(samplers, old, strict=True):
        assert not s.cuda_graph
        assert not s.static_shapes
        assert s.generator is not gen  # a capture that failed midway poisons its generator
        _check(s, torch.arange(0, 300, 7))


def test_prepared_samplers_sample_correctly_from_several_threads() -> None:
    indptr, indices = _graph()
    samplers = [
        NeighborSampler(indptr, indices, FANOUTS, device="cpu", seed=k, static_shapes=True)
        for k in range(3)
    ]
    for s in samplers:
        s.prepare(32)
    errors: list[BaseException] = []

    def work(s: NeighborSampler, k: int) -> None:
        try:
            for i in range(5):
                _check(s, torch.arange(k + i, 300, 11)[:32])
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s, k)) for k, s in enumerate(samplers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.gpu
def test_gpu_samplers_prepared_one_by_one_then_replayed_from_threads() -> None:
    """The sampler server's pattern: captures before serving, replays from worker threads."""
    indptr, indices = _graph()
    samplers = [NeighborSampler(indptr, indices, FANOUTS, device="cuda", seed=k) for k in range(4)]
    streams = [torch.cuda.Stream() for _ in samplers]  # type: ignore[no-untyped-call]
    for s, stream in zip(samplers, streams, strict=True):
        with torch.cuda.stream(stream):
            s.prepare(32)
        stream.synchronize()
        assert s.cuda_graph
        assert (32, False) in s._graphs
    errors: list[BaseException] = []

    def work(s: NeighborSampler, stream: torch.cuda.Stream, k: int) -> None:
        try:
            with torch.cuda.stream(stream):
                for i in range(20):
                    _check(s, torch.arange(k + i, 300, 9)[:32].cuda())
        except BaseException as err:
            errors.append(err)

    threads = [
        threading.Thread(target=work, args=(s, st, k))
        for k, (s, st) in enumerate(zip(samplers, streams, strict=True))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(s.cuda_graph for s in samplers), "no capture failed"
    # the default generator still works (dropout in the trainer uses it)
    assert torch.rand(4, device="cuda").numel() == 4
