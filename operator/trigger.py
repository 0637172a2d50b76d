"""One reconcile of one job, however many triggers ask for it: every kopf handler
(:mod:`distgnn_operator.handlers`) calls :func:`trigger`.

- a trigger that arrives while the job's reconcile waits is merged into it, and the
  reconciles of one job never overlap (its :class:`~distgnn_operator.handler_state.Slot`);
  one that only the timer asked for waits for one of the polls (half the workers);
- the reconcile runs in the runtime's thread pool on a snapshot of the watches, reads the
  job again when a write of its own conflicts, and is timed into the metrics; one over
  ``slow_reconcile_seconds`` is logged with the API requests it sent
  (:mod:`distgnn_operator.reconcile.call_trace`);
- new FailedCreate Events (:mod:`distgnn_operator.reconcile.failed_creates`) trigger, from
  the event loop, the jobs that own the partition Job or StatefulSet they are about.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import kopf

from distgnn_operator import metrics
from distgnn_operator.handler_state import Runtime, Slot
from distgnn_operator.reconcile import (
    ApiError,
    ReconcileOptions,
    ReconcileResult,
    reconcile_job,
)
from distgnn_operator.reconcile.call_trace import CallTrace
from distgnn_operator.reconcile.event_queue import QueuedEvents
from distgnn_operator.reconcile.failed_creates import NewEvents
from distgnn_operator.reconcile.watched import WatchedReads

log = logging.getLogger(__name__)


async def trigger(
    memo: kopf.Memo, namespace: str, name: str, *, poll: bool
) -> ReconcileResult | None:
    """Reconcile one job now, or merge into the reconcile of it that is already waiting."""
    runtime: Runtime = memo.runtime
    if runtime.closing:
        return None
    key = (namespace, name)
    slot = runtime.slots.setdefault(key, Slot())
    slot.poll = slot.poll or poll
    slot.changed = slot.changed or not poll
    if slot.waiting:
        return None
    slot.waiting = True
    async with slot.lock:
        if runtime.closing:  # the shutdown began while this trigger waited
            slot.waiting = False
            return None
        if not slot.changed and runtime.polls is not None:
            async with runtime.polls:  # a change that arrives meanwhile waits for this one
                result = await _reconcile_slot(runtime, slot, namespace, name)
        else:
            result = await _reconcile_slot(runtime, slot, namespace, name)
    if result is not None and result.gone and not slot.waiting:
        runtime.slots.pop(key, None)
    return result


async def _reconcile_slot(
    runtime: Runtime, slot: Slot, namespace: str, name: str
) -> ReconcileResult | None:
    """Run the slot's merged triggers as one reconcile, on a snapshot of the watches."""
    slot.waiting = False
    options = dataclasses.replace(runtime.options, poll_progress=slot.poll)
    slot.poll = slot.changed = False
    watched = runtime.watched(namespace, name)
    trace = CallTrace(runtime.api)
    writes = QueuedEvents(trace, runtime.posting)
    api = WatchedReads(writes, watched, runtime.latest, runtime.events)
    return await _run(runtime, api, trace, namespace, name, options)


def _reconcile_timed(
    api: WatchedReads,
    namespace: str,
    name: str,
    options: ReconcileOptions,
    trace: CallTrace | None = None,
    slow: float = 0.0,
) -> ReconcileResult:
    """Reconcile in a worker thread, timing the reconcile itself (not the wait for a thread).
    A reconcile over ``slow`` seconds (when given) is logged with the requests ``trace``
    (beneath ``api``) saw it send."""
    started = time.perf_counter()
    if trace is not None:
        trace.begin()
    try:
        for attempt in range(3):
            try:
                return reconcile_job(api, namespace, name, options)
            except ApiError as err:
                # A stale read (our own status write raced a watch event): read again.
                if not err.conflict or attempt == 2:
                    raise
                api.refresh()
        raise AssertionError("unreachable")
    finally:
        seconds = time.perf_counter() - started
        metrics.RECONCILE_SECONDS.observe(seconds)
        if trace is not None and slow and seconds > slow:
            log.warning("slow reconcile %s/%s: %s", namespace, name, trace.describe(seconds))


async def _run(
    runtime: Runtime,
    api: WatchedReads,
    trace: CallTrace,
    namespace: str,
    name: str,
    options: ReconcileOptions,
) -> ReconcileResult | None:
    """One reconcile in the pool; None when the operator is stopping (its pools are shut)."""
    loop = asyncio.get_running_loop()
    slow = runtime.settings.slow_reconcile_seconds
    try:
        result = await loop.run_in_executor(
            runtime.executor, _reconcile_timed, api, namespace, name, options, trace, slow
        )
    except RuntimeError:
        if runtime.closing:  # the shutdown shut the pool between the check and the submit
            return None
        metrics.RECONCILE_ERRORS.labels(kind="RuntimeError").inc()
        raise
    except Exception as err:
        metrics.RECONCILE_ERRORS.labels(kind=type(err).__name__).inc()
        raise
    if result.gone:
        metrics.forget_job(namespace, name)
    elif result.phase is not None:
        metrics.observe_phase(namespace, name, result.phase.value)
        metrics.observe_job(namespace, name, result.restarts, result.partition_figures)
        if result.transitioned:
            metrics.record_transition(
                result.previous_phase.value if result.previous_phase else None,
                result.phase.value,
                result.failure_reason,
            )
    for action in result.actions:
        log.info("%s/%s: %s", namespace, name, action)
    return result


def _on_failed_creates(memo: kopf.Memo, loop: asyncio.AbstractEventLoop) -> NewEvents:
    """What the FailedCreates thread tells of new Events: reconcile, in the event loop, the
    jobs whose partition Job or StatefulSet they are about."""

    def on_new(namespace: str, uids: set[str]) -> None:
        loop.call_soon_threadsafe(_reconcile_owners, memo, namespace, uids)

    return on_new


def _reconcile_owners(memo: kopf.Memo, namespace: str, uids: set[str]) -> None:
    runtime: Runtime = memo.runtime
    for name in runtime.jobs_owning(namespace, uids):
        task = asyncio.ensure_future(_trigger_logged(memo, namespace, name))
        runtime.tasks.add(task)
        task.add_done_callback(runtime.tasks.discard)


async def _trigger_logged(memo: kopf.Memo, namespace: str, name: str) -> None:
    """A reconcile no kopf handler awaits: a failure is logged (the next trigger retries)."""
    try:
        await trigger(memo, namespace, name, poll=False)
    except Exception as err:
        log.warning(
            "reconcile of %s/%s after a FailedCreate Event failed: %s", namespace, name, err
        )
