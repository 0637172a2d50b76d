"""Array work spread over the host's cores: how many threads, and a map over tasks.

numpy releases the GIL in its array kernels (random draws into arrays, gathers, sorts,
reductions), so threads on chunks of a large array use the cores without copies between
processes. Callers keep results independent of the thread count (each chunk its own seeded
stream, its own output slice).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from distgnn_api.contract import ENV_HOST_THREADS, WorkloadEnv

ENV_THREADS = ENV_HOST_THREADS
"""Threads of the host-side array work (generators, edge splits); default: the CPUs this
process may use. Results do not depend on it."""

T = TypeVar("T")


def host_threads() -> int:
    """:data:`ENV_THREADS`, or the CPUs this process may use."""
    raw = WorkloadEnv.setting(ENV_THREADS)
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise ValueError(f"{ENV_THREADS}={raw!r}: give a number of threads") from None
    return max(1, len(os.sched_getaffinity(0)))


def run_parallel(
    fn: Callable[..., T], calls: Iterable[tuple[Any, ...]], threads: int | None = None
) -> list[T]:
    """``fn(*args)`` for each ``args`` of ``calls``, on ``threads`` threads (default
    :func:`host_threads`); the results in order."""
    todo = list(calls)
    threads = host_threads() if threads is None else threads
    if threads == 1 or len(todo) <= 1:
        return [fn(*a) for a in todo]
    with ThreadPoolExecutor(max_workers=min(threads, len(todo)), thread_name_prefix="host") as pool:
        return list(pool.map(lambda a: fn(*a), todo))


def take(table: Any, index: Any, threads: int | None = None, chunk: int = 1 << 22) -> Any:
    """``np.take(table, index, axis=0)`` in chunks of ``index`` (flattened), on all cores."""
    import numpy as np

    flat = np.asarray(index).reshape(-1)
    out = np.empty((len(flat), *np.shape(table)[1:]), dtype=np.asarray(table).dtype)

    def task(a: int, b: int) -> None:
        np.take(table, flat[a:b], axis=0, out=out[a:b])

    run_parallel(
        task, [(a, min(a + chunk, len(flat))) for a in range(0, len(flat), chunk)], threads
    )
    return out.reshape(*np.shape(index), *np.shape(table)[1:])
