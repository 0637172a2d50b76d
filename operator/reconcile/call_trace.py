"""The API requests of one reconcile, timed, so that a slow reconcile can be told apart: which
requests it waited for, and how much of its time no request explains (a wait for a CPU, for
the interpreter's lock, or for a thread of the writers' pool).

:class:`CallTrace` wraps the client that sends requests to the API server, beneath the
layers that answer reads from the watches and queue the Events: it sees only real requests,
from the reconcile's thread and from the writers' pool alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from distgnn_operator.reconcile.forwarding import ForwardingApi, T
from distgnn_operator.reconcile.kube_api import Kind, KubeApi


@dataclass(frozen=True)
class Call:
    """One request: what it was, when it began (seconds after the trace began), how long it
    took, and the thread that sent it."""

    verb: str
    resource: str
    name: str
    start: float
    seconds: float
    thread: str
    failed: bool = False


class CallTrace(ForwardingApi):
    """A KubeApi that records every call it forwards (safe for the writers' threads)."""

    def __init__(self, api: KubeApi, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(api)
        self._clock = clock
        self.began = clock()
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    def begin(self) -> None:
        """Count the calls' times from now (the reconcile's start)."""
        self.began = self._clock()

    def _forward(self, verb: str, kind: Kind, name: str, call: Callable[[KubeApi], T]) -> T:
        start = self._clock()
        failed = True
        try:
            answer = super()._forward(verb, kind, name, call)
            failed = False
            return answer
        finally:
            end = self._clock()
            record = Call(
                verb,
                kind.plural,
                name,
                start - self.began,
                end - start,
                threading.current_thread().name,
                failed,
            )
            with self._lock:
                self.calls.append(record)

    def api_seconds(self) -> float:
        """Seconds during which at least one request was in flight (overlaps counted once)."""
        with self._lock:
            spans = sorted((c.start, c.start + c.seconds) for c in self.calls)
        total, end = 0.0, float("-inf")
        for start, stop in spans:
            if stop > end:
                total += stop - max(start, end)
                end = stop
        return total

    def describe(self, seconds: float) -> str:
        """A line about a reconcile of ``seconds``: its requests in the order they began."""
        with self._lock:
            calls = sorted(self.calls, key=lambda c: c.start)
        parts = [
            f"{c.verb} {c.resource}/{c.name or '*'} at +{c.start:.3f} for {c.seconds:.3f}s"
            f" [{c.thread}]{' failed' if c.failed else ''}"
            for c in calls
        ]
        api = self.api_seconds()
        return (
            f"{seconds:.3f}s, {api:.3f}s in requests, {max(0.0, seconds - api):.3f}s in none;"
            f" {len(calls)} requests: {'; '.join(parts) or 'none'}"
        )
