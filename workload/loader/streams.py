"""Side CUDA streams that outlive the work queued on them.

PyTorch's caching allocator keeps the blocks freed on a stream for later allocations on that
same stream. A loop that takes a new side stream for every epoch, evaluation pass or eager
step (``torch.cuda.Stream()`` hands out the next of 32 pooled streams) leaves each stream's
cached blocks reserved and unusable by the next: a trainer's reserved memory then grows with
the epochs while its allocated memory does not. A :class:`StreamPool` lends streams instead:
work that runs one after the other reuses one stream (and its cached blocks), work that runs
at the same time gets a stream each.

A loader's stream (:data:`LOADER_STREAMS`) has the device's highest priority: its sampling
kernels are short and the loader thread waits for them (the batch's sizes come to the
host), while the training step's kernels are long and nobody on the host waits for them. At
equal priority the sampler's kernels queue behind a whole step, and the loader falls behind
the trainer; ahead of the step's, they run at once and the step fills the gaps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


def _new_stream(device: Any) -> Any:
    return torch.cuda.Stream(device)  # type: ignore[no-untyped-call]


HIGHEST_PRIORITY = -(1 << 10)
"""Lower numbers are higher priorities; torch maps one below the device's range to its
highest."""


def _high_priority_stream(device: Any) -> Any:
    return torch.cuda.Stream(device, priority=HIGHEST_PRIORITY)  # type: ignore[no-untyped-call]


class StreamPool:
    """Side streams per device, lent while in use and kept for the next borrower."""

    def __init__(self, factory: Callable[[Any], Any] = _new_stream) -> None:
        self._factory = factory
        self._free: dict[Hashable, list[Any]] = {}
        self._lock = threading.Lock()
        self.created = 0
        """Streams made so far (a borrower that finds none free makes one)."""

    @contextmanager
    def lease(self, device: torch.device) -> Iterator[Any]:
        """A stream on ``device`` for the duration of the block: the last one returned, or
        a new one when every stream of the device is lent."""
        with self._lock:
            free = self._free.setdefault(device, [])
            stream = free.pop() if free else None
            if stream is None:
                self.created += 1
        if stream is None:
            stream = self._factory(device)
        try:
            yield stream
        finally:
            with self._lock:
                self._free[device].append(stream)


SIDE_STREAMS = StreamPool()
"""The process's side streams of default priority: eager steps borrow theirs here."""

LOADER_STREAMS = StreamPool(_high_priority_stream)
"""The process's loader streams, of the highest priority: prefetch threads borrow theirs
here."""
