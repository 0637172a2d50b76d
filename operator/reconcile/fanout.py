"""Running a reconcile's independent writes together.

A reconcile that creates a job's children sends several writes that do not depend on each
other (a new job's Service and its two StatefulSets; a gang restart's pod deletions). One
after another, each waits for the API server in turn; a :class:`Concurrently` fan-out sends
them at once from a small thread pool, so the reconcile waits about as long as for the
slowest. :func:`in_turn` sends them one after another (the default, and what the unit
tests use for a fixed order of writes).

Either way every call runs, and then the first failure in the order of the calls is raised:
a write that fails never stops an independent one, and the reconcile reports the same error
it would have met first in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, wait
from typing import Protocol, TypeVar

T = TypeVar("T")


class Fanout(Protocol):
    """Runs every call and returns their results in order (raising the first failure)."""

    def __call__(self, calls: Sequence[Callable[[], T]]) -> list[T]: ...


def in_turn(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Every call, one after another."""
    results: list[T] = []
    failure: BaseException | None = None
    for call in calls:
        try:
            results.append(call())
        except Exception as err:
            failure = failure or err
    if failure is not None:
        raise failure
    return results


class Concurrently:
    """Every call at once: the last in the calling thread, the others in the executor (a
    pool of its own, never the one that runs reconciles, which could wait on itself). Only
    the last call may fan out again: it runs in the calling thread, so no thread of the
    pool ever waits for the pool."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    def __call__(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        if len(calls) <= 1:
            return in_turn(calls)
        futures: list[Future[T]] = [self._executor.submit(call) for call in calls[:-1]]
        last: list[T] = []
        failure: BaseException | None = None
        try:
            last.append(calls[-1]())
        except Exception as err:
            failure = err
        wait(futures)  # every call has run before a failure is raised
        for future in futures:
            error = future.exception()
            if error is not None:
                raise error
        if failure is not None:
            raise failure
        return [*(future.result() for future in futures), *last]
