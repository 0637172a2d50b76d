"""The end of a job, bounded: every process leaves within ``DISTGNN_SHUTDOWN_TIMEOUT``.

Trainers mark themselves finished once training is over (trainer 0 after it wrote the
result); samplers serve until every trainer has (:func:`wait_for_trainers`, no bound: that
is the whole training). Then every process calls :func:`leave`, which runs three steps on
one deadline:

1. announce that it is leaving and wait until every member of the job has (after that no
   process sends a request: every trainer is done, so no sampler or holder is asked again);
2. stop this process's RPC agent locally (not torch's graceful shutdown, a barrier with no
   bound);
3. the store's owner (trainer 0) waits until every other member confirmed it left, so that
   the store outlives every reader.

A step that runs out of time raises :class:`ShutdownError` naming the step and the members
it waited for; the entry point exits non-zero with that message. A stuck peer, a stuck RPC
agent or a lost store therefore end the process in bounded time instead of hanging it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

import torch.distributed.rpc as rpc

from distgnn_workload.runtime.rendezvous import Group, Member

log = logging.getLogger(__name__)

FINISHED_PREFIX = "distgnn/finished/"
LEAVING_PREFIX = "distgnn/leaving/"
LEFT_PREFIX = "distgnn/left/"
POLL_S = 0.05


class ShutdownError(RuntimeError):
    """A step of the shutdown did not finish in time; the message names the step and peers."""


def mark_finished(group: Group) -> None:
    """This trainer is done with training (and, on trainer 0, the result is written)."""
    group.store.set(FINISHED_PREFIX + group.me.name, "1")


def wait_for_trainers(group: Group) -> None:
    """Block until every trainer marked itself finished (a sampler's serving life)."""
    _wait_keys(
        group, FINISHED_PREFIX, group.trainers, float("inf"), "trainers finishing", poll_s=0.2
    )


def _missing(group: Group, prefix: str, members: Sequence[Member]) -> list[str]:
    return [m.name for m in members if not group.store.check([prefix + m.name])]


def _wait_keys(
    group: Group,
    prefix: str,
    members: Sequence[Member],
    deadline: float,
    step: str,
    *,
    poll_s: float = POLL_S,
) -> None:
    """Wait until every member set its key. Names the members still missing when time runs
    out, or when the store goes away meanwhile (its owner left first: the peer it waited
    for is the cause, not the store)."""
    missing = [m.name for m in members]
    try:
        while True:
            missing = _missing(group, prefix, members)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ShutdownError(
                    f"shutdown step '{step}' timed out waiting for {', '.join(missing)}"
                )
            time.sleep(poll_s)
    except ShutdownError:
        raise
    except RuntimeError as err:
        raise ShutdownError(
            f"shutdown step '{step}': the job's store went away ({err}) while waiting for "
            f"{', '.join(missing)}"
        ) from err


def run_bounded(fn: Callable[[], None], timeout_s: float, step: str) -> None:
    """Run ``fn`` on a daemon thread; :class:`ShutdownError` if it does not return in time."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as err:  # handed to the caller
            errors.append(err)

    thread = threading.Thread(target=target, name=f"shutdown-{step}", daemon=True)
    thread.start()
    thread.join(max(timeout_s, 0.0))
    if thread.is_alive():
        raise ShutdownError(f"shutdown step '{step}' did not finish within {timeout_s:.1f}s")
    if errors:
        raise ShutdownError(f"shutdown step '{step}' failed: {errors[0]}") from errors[0]


def leave(group: Group, *, timeout_s: float, rpc_running: bool = True) -> float:
    """Leave the job in order within ``timeout_s``; returns the seconds it took."""
    start = time.monotonic()
    deadline = start + timeout_s
    me = group.me
    others = [m for m in group.members if m is not me]
    try:
        # No store call waits longer than the bound (a half-open connection would wait for
        # the client's rendezvous timeout).
        group.store.set_timeout(timedelta(seconds=max(timeout_s, 1.0)))
        group.store.set(LEAVING_PREFIX + me.name, "1")
    except RuntimeError as err:
        raise ShutdownError(
            f"shutdown step 'every member leaving': the job's store: {err}"
        ) from err
    _wait_keys(group, LEAVING_PREFIX, group.members, deadline, "every member leaving")
    if rpc_running:
        run_bounded(
            lambda: rpc.shutdown(graceful=False),
            deadline - time.monotonic(),
            "stop the RPC agent",
        )
    if group.rpc_rank == 0:
        _wait_keys(group, LEFT_PREFIX, others, deadline, "peers left")
    else:
        try:
            group.store.set(LEFT_PREFIX + me.name, "1")
        except RuntimeError as err:  # the owner may be gone already: it saw everyone leaving
            log.debug("store gone before %s confirmed leaving: %s", me.name, err)
    took = time.monotonic() - start
    log.info("left the job in %.2fs", took)
    return took
