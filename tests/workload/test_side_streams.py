"""Side streams are lent and kept: the allocator's cache per stream must not grow per epoch."""

from __future__ import annotations

import threading

import pytest
import torch

from distgnn_workload.loader import Prefetcher
from distgnn_workload.loader.streams import StreamPool


def _pool() -> StreamPool:
    return StreamPool(factory=lambda device: object())


def test_work_one_after_the_other_reuses_one_stream() -> None:
    pool = _pool()
    dev = torch.device("cuda", 0)
    seen = []
    for _ in range(10):  # ten epochs' prefetch threads
        with pool.lease(dev) as stream:
            seen.append(stream)
    assert len({id(s) for s in seen}) == 1
    assert pool.created == 1


def test_work_at_the_same_time_gets_a_stream_each_and_devices_do_not_share() -> None:
    pool = _pool()
    dev0, dev1 = torch.device("cuda", 0), torch.device("cuda", 1)
    with pool.lease(dev0) as a, pool.lease(dev0) as b, pool.lease(dev1) as c:
        assert len({id(a), id(b), id(c)}) == 3
    with pool.lease(dev0) as again:
        assert again in (a, b)
    assert pool.created == 3


def test_threads_borrow_safely() -> None:
    pool = _pool()
    dev = torch.device("cuda", 0)
    held: list[object] = []
    barrier = threading.Barrier(4)

    def borrow() -> None:
        with pool.lease(dev) as stream:
            held.append(stream)
            barrier.wait()

    threads = [threading.Thread(target=borrow) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in held}) == 4  # all four held at once
    with pool.lease(dev) as stream:
        assert stream in held
    assert pool.created == 4


@pytest.mark.gpu
def test_epochs_of_prefetch_keep_the_reserved_memory_of_the_first() -> None:
    """Every epoch's prefetch thread allocates its batches on the side stream; with a new
    stream per epoch each epoch's freed blocks stayed cached for a stream no one used again."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    dev = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    def produce(i: int) -> torch.Tensor:
        return torch.full((16 << 20,), i, dtype=torch.uint8, device=dev)  # 16 MiB

    def record(item: torch.Tensor, stream: torch.cuda.Stream) -> None:
        item.record_stream(stream)

    reserved = []
    for epoch in range(6):
        prefetcher = Prefetcher(produce, 6, depth=2, device=dev, record=record)
        total = sum(int(item[0].item()) for item in prefetcher)
        assert total == sum(range(6)), epoch
        torch.cuda.synchronize()
        reserved.append(torch.cuda.memory_reserved(dev))
    assert reserved[-1] == reserved[0], [r >> 20 for r in reserved]


@pytest.mark.gpu
def test_a_prefetch_thread_samples_on_a_stream_of_the_highest_priority() -> None:
    """The loader's short kernels go ahead of the training step's (see the module)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    dev = torch.device("cuda", torch.cuda.current_device())
    seen: list[int] = []

    def produce(i: int) -> int:
        seen.append(torch.cuda.current_stream(dev).priority)
        return i

    assert list(Prefetcher(produce, 3, depth=2, device=dev)) == [0, 1, 2]
    default = torch.cuda.current_stream(dev).priority
    highest = torch.cuda.Stream(dev, priority=-(1 << 10)).priority  # type: ignore[no-untyped-call]
    assert highest < default  # the device has priorities: the test means something
    assert seen == [highest] * 3
