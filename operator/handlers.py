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
into it (:mod:`distgnn_operator.trigger`). The timer's reconciles take half the workers at
most, and are spread out to ``poll_rate`` a second over all jobs (each job's interval grows
with their number). The reconcile itself (``distgnn_operator.reconcile``) is synchronous
and runs in a thread pool with its own API client; one over ``slow_reconcile_seconds`` is
logged with the API requests it sent (:mod:`distgnn_operator.reconcile.call_trace`).
"""

from __future__ import annotations

import asyncio
import logging
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
from distgnn_operator.reconcile import ChildRejected, ReconcileOptions
from distgnn_operator.reconcile.event_queue import EventQueue
from distgnn_operator.reconcile.failed_creates import FailedCreates
from distgnn_operator.reconcile.fanout import Concurrently
from distgnn_operator.reconcile.kube_api import DISTGNNJOB
from distgnn_operator.reconcile.watched import CACHED_KINDS, WATCHED_KINDS
from distgnn_operator.settings import OperatorSettings
from distgnn_operator.trigger import _on_failed_creates, trigger

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
