"""What a reconcile derives from the job's spec alone, kept while the spec stays the same.

Most reconciles of a job find the spec unchanged since the last one (a pod changed, a timer
fell due), yet each would parse it, check its capacity plan and render every child again.
:class:`SpecMemo` keeps them per spec content (its canonical JSON, so a spec written again
with the same values is the same entry, and a changed spec is a new one whatever its
generation says):

- the parsed spec (a spec the models reject is not kept: it fails again each time);
- the capacity shortfalls under the operator's policy;
- each child a builder renders, per the facts of the JobContext the builder also reads.

The memo is bounded (least recently used specs go first) and shared by the reconcile
threads. What it returns is shared: callers copy before they change it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from distgnn_api.capacity_check import Shortfall
from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_operator.builders import JobContext
from distgnn_operator.status import capacity_policy

T = TypeVar("T")

DEFAULT_LIMIT = 1024
"""Specs kept: one per live job is enough, and jobs rarely share one."""


@dataclass
class _Entry:
    spec: DistGNNJobSpec
    shortfalls: dict[tuple[str, int], list[Shortfall]] = field(default_factory=dict)
    children: dict[Hashable, Any] = field(default_factory=dict)


class SpecMemo:
    """Parsed specs, their capacity shortfalls and rendered children, by spec content."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._by_spec: dict[int, _Entry] = {}
        """id(spec) -> its entry, while the entry (which holds the spec) lives."""

    def __len__(self) -> int:
        return len(self._entries)

    def parse(self, raw: Any) -> DistGNNJobSpec:
        """The parsed spec (SpecError when the models reject it)."""
        key = json.dumps(raw, sort_keys=True, separators=(",", ":"))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry.spec
        spec = parse_spec(raw)
        with self._lock:
            entry = self._entries.setdefault(key, _Entry(spec))
            self._by_spec[id(entry.spec)] = entry
            while len(self._entries) > self._limit:
                _, old = self._entries.popitem(last=False)
                self._by_spec.pop(id(old.spec), None)
        return entry.spec

    def _entry(self, spec: DistGNNJobSpec) -> _Entry | None:
        with self._lock:
            return self._by_spec.get(id(spec))

    def shortfalls(
        self, spec: DistGNNJobSpec, policy: capacity_policy.CapacityPolicy, gpu_memory: int
    ) -> list[Shortfall]:
        """capacity_policy.shortfalls, once per spec, policy and GPU size."""
        entry = self._entry(spec)
        if entry is None:
            return capacity_policy.shortfalls(spec, policy, gpu_memory)
        key = (policy.value, gpu_memory)
        found = entry.shortfalls.get(key)
        if found is None:
            found = entry.shortfalls[key] = capacity_policy.shortfalls(spec, policy, gpu_memory)
        return found

    def render(self, builder: Callable[..., T], ctx: JobContext, *args: Hashable) -> T:
        """builder(ctx, *args), once per spec and per the context's other facts (a builder
        that renders nothing for the job returns None, which is kept too)."""
        entry = self._entry(ctx.spec)
        if entry is None:
            return builder(ctx, *args)
        key = (
            builder.__module__,
            builder.__qualname__,
            args,
            ctx.name,
            ctx.namespace,
            ctx.uid,
            ctx.partition_reused,
            ctx.restart_generation,
            repr(ctx.operator),
            repr(sorted(ctx.placements.items())),
        )
        if key not in entry.children:
            entry.children[key] = builder(ctx, *args)
        return cast(T, entry.children[key])
