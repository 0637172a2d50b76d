"""One thread that runs a rank's exchange rounds, in the order they were asked for.

A round blocks its caller until every rank has sent its counts: the ranks meet there, batch
after batch. On the loader thread that meeting stalled the sampling of the next batches
for as long as the slowest peer took. Handed to this thread instead, the loader samples on
while the round waits for the peers; the rounds still run one after the other in the order
of the calls, the same on every rank (the exchange's rule: the same collectives in the
same order everywhere).

After a failed task every later one fails at once with that error: the peers' group may be
broken, and a collective on it could wait for the whole timeout again. The thread is a
daemon: a process whose peer was lost exits even with a round still waiting.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import torch

T = TypeVar("T")


class OrderedWorker:
    """A daemon thread running submitted calls one at a time, first in, first out."""

    def __init__(self, name: str, device: torch.device) -> None:
        self.name = name
        self.device = device
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` after every call submitted before it; its result or error comes
        through the future."""
        if not self._thread.is_alive():
            raise RuntimeError(f"{self.name} has stopped")
        future: Future[T] = Future()
        self._tasks.put((fn, future))
        return future

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in its turn and wait for it."""
        return self.submit(fn).result()

    def stop(self) -> None:
        """Finish the calls already submitted, then end the thread."""
        self._tasks.put(None)
        self._thread.join()

    def _run(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        while True:
            task = self._tasks.get()
            if task is None:
                return
            fn, future = task
            if not future.set_running_or_notify_cancel():
                continue
            if self._failed is not None:
                error = RuntimeError(f"{self.name}: an earlier call failed: {self._failed}")
                future.set_exception(error.with_traceback(None))
                continue
            try:
                future.set_result(fn())
            except BaseException as error:  # handed to whoever waits for the future
                self._failed = error
                future.set_exception(error)
