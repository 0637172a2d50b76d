"""The pool a sampler server serves requests from, for either graph kind.

:class:`SamplerPool` holds ``concurrency`` samplers, each with its own CUDA stream (its CUDA
graph captured on that stream when it joins), the threads that run the requests, the
request metrics (count, seconds, bytes sent) and how often the feature-cache figures are
updated: every :data:`CACHE_RATIO_EVERY` requests, and at least each second, so a short
job's ratio shows too, from its first look-ups. The servers
(:class:`~distgnn_workload.sampler.server.SamplerServer`,
:class:`~distgnn_workload.sampler.server.HeteroSamplerServer`) add what they sample
and how they pack it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import torch

from distgnn_workload import metrics

CACHE_RATIO_EVERY = 32
"""Requests between two updates of the cache figures (at least one each second)."""


class Prepares(Protocol):
    """A sampler that captures its fixed-shape work for a batch size (a no-op on CPU)."""

    def prepare(self, batch_size: int) -> None: ...


S = TypeVar("S", bound=Prepares)


@dataclass
class Slot(Generic[S]):
    """One sampler of the pool and the CUDA stream its requests run on."""

    sampler: S
    stream: torch.cuda.Stream | None


class SamplerPool(Generic[S]):
    """Samplers with their streams, the request threads and the request metrics."""

    def __init__(self, *, rank: int, device: torch.device, concurrency: int) -> None:
        self.rank = rank
        self.name = f"sampler-{rank}"
        self.device = device
        self.concurrency = max(1, concurrency)
        self._slots: queue.SimpleQueue[Slot[S]] = queue.SimpleQueue()
        self.executor = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="sample"
        )
        self._lock = threading.Lock()
        self.served = 0
        self.seeds_served = 0
        self._ratio_at = 0.0
        self._tier_rows = 0
        self._host_rows = 0
        label = str(rank)
        self._requests = metrics.SAMPLER_REQUESTS.labels(label, "batch")
        self._seconds = metrics.SAMPLER_REQUEST_SECONDS.labels(label, "batch")
        self._bytes = metrics.SAMPLER_BYTES_SENT.labels(label)

    def add(self, sampler: S, batch_size: int) -> None:
        """Put ``sampler`` in the pool with a stream of its own, its CUDA graph for
        ``batch_size`` captured now on that stream."""
        stream = None
        if self.device.type == "cuda":
            stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
            with torch.cuda.stream(stream):
                sampler.prepare(batch_size)
            stream.synchronize()
        else:
            sampler.prepare(batch_size)
        self._slots.put(Slot(sampler, stream))

    @contextmanager
    def slot(self) -> Iterator[Slot[S]]:
        """A free sampler of the pool, its stream the current one; back in the pool after."""
        slot = self._slots.get()
        try:
            if slot.stream is None:
                yield slot
            else:
                torch.cuda.set_device(self.device)
                with torch.cuda.stream(slot.stream):
                    yield slot
        finally:
            self._slots.put(slot)

    def count(self, started: float, sent: int, seeds: int) -> bool:
        """Count one served request (``started``: its perf_counter at arrival, ``sent``: its
        bytes); True when the cache figures are due for an update."""
        self._requests.inc()
        self._seconds.observe(time.perf_counter() - started)
        self._bytes.inc(sent)
        now = time.monotonic()
        with self._lock:
            self.served += 1
            self.seeds_served += seeds
            due = self.served % CACHE_RATIO_EVERY == 0 or now - self._ratio_at >= 1.0
            if due:
                self._ratio_at = now
        return due

    def count_tiers(self, rows: int, host_rows: int) -> None:
        """Add the tiered rows gathered since the last call (``host_rows`` of them from the
        host tier) and set the GPU tier's share of all of them."""
        with self._lock:
            self._tier_rows += rows
            self._host_rows += host_rows
            if not self._tier_rows:
                return
            gpu_share = 1.0 - self._host_rows / self._tier_rows
        metrics.SAMPLER_FEATURE_GPU_TIER_HIT_RATIO.labels(str(self.rank)).set(gpu_share)
