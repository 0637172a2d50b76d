"""kopf handlers: every trigger funnels into one reconcile of one job.

- create/resume/update of a DistGNNJob reconcile it at once;
- a timer reconciles each job every ``progress_poll_interval`` seconds and reads trainer 0's
  /progress (deadlines and TTLs fall due without any event);
- events of the job's Jobs, StatefulSets and Pods reconcile the owning job, and so do those
  of its Kueue Workload (with the ``kueue`` setting: admitted, evicted, requeued);
- new FailedCreate Events of a job's partition Job or StatefulSets reconcile the job; a
  thread of their own lists them (:mod:`distgnn_operator.reconcile.failed_creates`), and
  the reconciles read its last LIST;
- indexes of the objects labelled with a job, of the jobs and of the claims (kopf fills them
  from its watches before any handler runs) answer the reconcile's reads of the job and its
  children (:mod:`distgnn_operator.reconcile.watched`); they keep only the fields a
  reconcile reads (:mod:`distgnn_operator.reconcile.slim`).

Reconciles of one job never overlap, and triggers that arrive while one waits are merged
into it. The timer's reconciles take half the workers at most, and are spread out to
``poll_rate`` a second over all jobs (each job's interval grows with their number). The
reconcile itself (``distgnn_operator.reconcile``) is synchronous and runs in a thread pool
with its own API client; one over ``slow_reconcile_seconds`` is logged with the API requests
it sent (:mod:`distgnn_operator.reconcile.call_trace`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf

from distgnn_api.spec import GROUP, PLURAL, TERMINAL_PHASES, VERSION
from distgnn_operator import metrics
from distgnn_operator.builders import OperatorPeer
from distgnn_operator.connection import bearer_token, load_configuration
from distgnn_operator.constants import (
    FINALIZER,
    KOPF_PREFIX,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    MANAGER,
)
from distgnn_operator.handler_state import (
    WRITES_PER_STAGE,
    Runtime,
    Slot,
    index_id,
    indexer,
    make_api,
    named_indexer,
)
from distgnn_operator.reconcile import (
    ApiError,
    ChildRejected,
    ReconcileOptions,
    ReconcileResult,
    reconcile_job,
)
from distgnn_operator.reconcile.call_trace import CallTrace
from distgnn_operator.reconcile.event_queue import EventQueue, QueuedEvents
from distgnn_operator.reconcile.failed_creates import FailedCreates, NewEvents
from distgnn_operator.reconcile.fanout import Concurrently
from distgnn_operator.reconcile.kube_api import DISTGNNJOB
from distgnn_operator.reconcile.watched import (
    CACHED_KINDS,
    WATCHED_KINDS,
    WatchedReads,
)
from distgnn_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

# Read at import: kopf fixes a timer's interval when the handler is registered.
SETTINGS = OperatorSettings()

CHILD_LABELS: dict[str, Any] = {
    LABEL_MANAGED_BY: MANAGER,
    LABEL_JOB: kopf.PRESENT,
}
# Everything a LIST of a job's pods by its label returns, so the index can answer it.
INDEX_LABELS: dict[str, Any] = {LABEL_JOB: kopf.PRESENT}

for _kind in (*WATCHED_KINDS, *CACHED_KINDS):
    _group, _, _version = _kind.api_version.rpartition("/")
    if _kind in CACHED_KINDS:
        kopf.index(_group, _version, _kind.plural, id=index_id(_kind))(named_indexer(_kind))
    else:
        kopf.index(_group, _version, _kind.plural, id=index_id(_kind), labels=INDEX_LABELS)(
            indexer(_kind)
        )


@kopf.on.login()
def login(*, settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
    """Log kopf in with the same credentials the reconciler uses."""
    cfg = load_configuration(OperatorSettings())
    scheme, token = bearer_token(cfg)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        username=cfg.username or None,
        password=cfg.password or None,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        trust_env=settings.networking.trust_env,
    )


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    """Store the operator settings and the indexes on memo, tune kopf, start listing the
    FailedCreate Events, and serve the metrics."""
    ops = OperatorSettings()
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=KOPF_PREFIX, key="last-handled-configuration"
    )
    settings.watching.server_timeout = ops.watch_server_timeout
    settings.watching.client_timeout = ops.watch_client_timeout
    settings.watching.connect_timeout = ops.connect_timeout
    # The operator posts its own Events for every transition; kopf only adds its warnings.
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = ops.workers
    # A deleted job's timer may be mid-reconcile: wait for it briefly, then re-check often,
    # so the finalizer kopf keeps for the timer is released in seconds (while an operator
    # runs; without one, a deleted job waits for it).
    settings.background.instant_exit_timeout = 2.0
    settings.background.cancellation_polling = 2.0
    operator = OperatorPeer(ops.pod_namespace, ops.pod_labels) if ops.pod_namespace else None
    api = make_api(ops)
    writers = ThreadPoolExecutor(
        max_workers=ops.workers * (WRITES_PER_STAGE - 1), thread_name_prefix="write"
    )
    memo.runtime = Runtime(
        settings=ops,
        api=api,
        executor=ThreadPoolExecutor(max_workers=ops.workers, thread_name_prefix="reconcile"),
        posting=EventQueue(api),
        writers=writers,
        options=ReconcileOptions(
            fanout=Concurrently(writers),
            progress_timeout=ops.progress_timeout,
            operator=operator,
            child_rejection_limit=ops.child_rejection_limit,
            capacity_policy=ops.capacity_policy,
            gpu_memory=ops.gpu_memory,
            kueue=ops.kueue,
        ),
        indexes={kind: kwargs[index_id(kind)] for kind in (*WATCHED_KINDS, *CACHED_KINDS)},
        polls=asyncio.Semaphore(max(1, ops.workers // 2)),
        events=FailedCreates(api, _on_failed_creates(memo, asyncio.get_running_loop())),
    )
    memo.runtime.events.start()
    if ops.metrics_port:
        from prometheus_client import start_http_server

        try:
            start_http_server(ops.metrics_port)
        except OSError as err:
            log.warning("metrics port %d is unavailable: %s", ops.metrics_port, err)


@kopf.on.cleanup()
def shutdown(memo: kopf.Memo, **_: Any) -> None:
    """Let running reconciles finish, then post the Events they recorded."""
    runtime: Runtime | None = getattr(memo, "runtime", None)
    if runtime is not None:
        runtime.closing = True  # a timer or watch event from now on reconciles nothing
        if runtime.events is not None:
            runtime.events.close()
        runtime.executor.shutdown(wait=True, cancel_futures=True)
        runtime.writers.shutdown(wait=True)
        runtime.posting.close()


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


@kopf.on.create(GROUP, VERSION, PLURAL, backoff=2)
@kopf.on.resume(GROUP, VERSION, PLURAL, backoff=2)
@kopf.on.update(GROUP, VERSION, PLURAL, backoff=2)
async def reconcile_handler(
    *, name: str, namespace: str | None, reason: str, retry: int, memo: Any, **_: Any
) -> None:
    """A job appeared, changed, or was found at startup. A failed reconcile is retried with
    exponential backoff: transient errors (409, 429, 5xx, timeouts) until they pass, a child
    the API server refuses until the job fails at childRejectionLimit."""
    assert namespace is not None  # DistGNNJob is namespaced
    if reason == kopf.Reason.CREATE and retry == 0:
        metrics.JOBS_CREATED.inc()
    delay = memo.runtime.settings.retry_delay(retry)
    try:
        await trigger(memo, namespace, name, poll=False)
    except ChildRejected as err:
        raise kopf.TemporaryError(str(err), delay=delay) from err
    except Exception as err:  # 409, 429, 5xx, timeouts, lost connections: all pass in time
        raise kopf.TemporaryError(
            f"reconcile failed, retrying in {delay:g}s: {err}", delay=delay
        ) from err


def needs_timer(*, spec: Mapping[str, Any], status: Mapping[str, Any], **_: Any) -> bool:
    """Finished jobs need no polling, unless their TTL is still to fall due."""
    finished = status.get("phase") in {p.value for p in TERMINAL_PHASES}
    ttl = (spec.get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    return not finished or ttl is not None


@kopf.timer(GROUP, VERSION, PLURAL, interval=SETTINGS.progress_poll_interval, when=needs_timer)
async def periodic(*, name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    """Poll progress; let deadlines and TTLs fall due."""
    assert namespace is not None
    runtime: Runtime = memo.runtime
    if runtime.poll_due(runtime.slots.setdefault((namespace, name), Slot())):
        await trigger(memo, namespace, name, poll=True)


@kopf.on.event("batch", "v1", "jobs", labels=CHILD_LABELS)
@kopf.on.event("apps", "v1", "statefulsets", labels=CHILD_LABELS)
@kopf.on.event("", "v1", "pods", labels=CHILD_LABELS)
async def child_changed(
    *,
    type: str | None,
    labels: Mapping[str, str],
    namespace: str | None,
    memo: Any,
    **_: Any,
) -> None:
    """A child of a job changed: reconcile the job (the initial listing is covered by resume)."""
    if type is None or namespace is None:
        return
    await trigger(memo, namespace, labels[LABEL_JOB], poll=False)


async def workload_changed(
    *, type: str | None, labels: Mapping[str, str], namespace: str | None, memo: Any, **_: Any
) -> None:
    """Kueue admitted, evicted or requeued a job's Workload: reconcile the job."""
    if type is None or namespace is None:
        return
    await trigger(memo, namespace, labels[LABEL_JOB], poll=False)


if SETTINGS.kueue:  # without Kueue's RBAC (chart kueue.enabled=false) nothing watches Workloads
    kopf.on.event("kueue.x-k8s.io", "v1beta2", "workloads", labels=CHILD_LABELS)(workload_changed)


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def forget(*, name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    """A job is being deleted: forget its metrics and slot; its children follow by garbage
    collection. This handler is optional (it adds no finalizer of its own), but the periodic
    timer is not: kopf keeps FINALIZER on every job the timer serves (unfinished jobs, and
    finished ones whose TTL is due) and removes it when the timer stops. A job deleted while
    no operator runs stays Terminating until one returns (chart README: Uninstall)."""
    assert namespace is not None
    metrics.forget_job(namespace, name)
    runtime: Runtime | None = getattr(memo, "runtime", None)
    if runtime is not None:
        slot = runtime.slots.get((namespace, name))
        if slot is not None and not slot.lock.locked():
            runtime.slots.pop((namespace, name), None)
        runtime.latest.forget(DISTGNNJOB, namespace, name)
