"""What this process serves over RPC: one registry of named targets.

RPC functions (``_serve_features``, ``serve_batch``, ...) run on the RPC agent's threads and
find the object they serve here, under a typed key; the role registers each object once it
exists. A request that arrives before its target is registered waits for it, bounded
(:func:`configure`); once the role has registered everything it serves (:func:`seal`), a
missing target fails at once. Either error names the target and what is registered.

    >>> SERVER = Target[SamplerServer]("sampler server")
    >>> register(SERVER, server)  # the role, at start-up
    >>> get(SERVER)               # an RPC function, on an RPC thread
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from distgnn_api.contract import DEFAULT_RENDEZVOUS_TIMEOUT_S

T = TypeVar("T")


@dataclass(frozen=True)
class Target(Generic[T]):
    """The key of one RPC target; ``T`` is the type of what is registered under it."""

    name: str


class TargetMissingError(RuntimeError):
    """An RPC request for a target this process does not serve (or not yet, in time)."""


class TargetRegistry:
    """Named RPC targets of one process; thread-safe."""

    def __init__(self, wait_s: float = DEFAULT_RENDEZVOUS_TIMEOUT_S) -> None:
        self._targets: dict[str, Any] = {}
        self._sealed = False
        self._wait_s = wait_s
        self._changed = threading.Condition()

    def configure(self, *, wait_s: float) -> None:
        """How long a request waits for a target not registered yet (before :meth:`seal`)."""
        if wait_s <= 0:
            raise ValueError(f"wait_s={wait_s} must be a positive number of seconds")
        with self._changed:
            self._wait_s = wait_s

    def register(self, target: Target[T], obj: T) -> None:
        """Serve ``obj`` under ``target`` (replacing what was there)."""
        with self._changed:
            self._targets[target.name] = obj
            self._changed.notify_all()

    def seal(self) -> None:
        """Everything this process serves is registered: later misses fail at once."""
        with self._changed:
            self._sealed = True
            self._changed.notify_all()

    def find(self, target: Target[T]) -> T | None:
        """The registered object, or None (never waits: for optional targets)."""
        with self._changed:
            return cast("T | None", self._targets.get(target.name))

    def get(self, target: Target[T]) -> T:
        """The registered object; waits for it until the registry is sealed or the wait
        bound passes, then raises :class:`TargetMissingError` naming it."""
        with self._changed:
            deadline = time.monotonic() + self._wait_s
            while target.name not in self._targets and not self._sealed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            if target.name in self._targets:
                return cast("T", self._targets[target.name])
            registered = ", ".join(sorted(self._targets)) or "nothing"
            why = (
                "it registered everything it serves"
                if self._sealed
                else f"it was not registered within {self._wait_s:g}s"
            )
            raise TargetMissingError(
                f"this process does not serve the {target.name} over RPC ({why}; "
                f"registered: {registered})"
            )

    def clear(self) -> None:
        """Forget every target and unseal (a process that starts serving anew; tests)."""
        with self._changed:
            self._targets.clear()
            self._sealed = False
            self._changed.notify_all()


REGISTRY = TargetRegistry()
"""The registry of this process (one RPC agent per process)."""

register = REGISTRY.register
get = REGISTRY.get
find = REGISTRY.find
seal = REGISTRY.seal
configure = REGISTRY.configure
