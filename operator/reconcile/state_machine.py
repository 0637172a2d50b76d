"""One reconcile of one DistGNNJob: observe, compute the status, write it, then act on it.

The status is written before the actions it implies, so a gang restart's generation (and any
other decision) is durable before pods or their controllers are touched; an operator that
restarts in between finds the decision and finishes carrying it out. Actions that follow from
the spec and the children alone (creating a job's children, scaling for a suspension) go
together with the status write (:func:`~.actions.act`). Every action is idempotent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from distgnn_api.spec import (
    TERMINAL_PHASES,
    DistGNNJobSpec,
    DistGNNJobStatus,
    Phase,
    SpecError,
)
from distgnn_operator.builders import (
    JobContext,
    OperatorPeer,
)
from distgnn_operator.constants import (
    CHILD_CONFLICT,
    COND_FAILED,
    INVALID_SPEC,
    TTL_EXPIRED,
)
from distgnn_operator.reconcile import events, kueue_gate
from distgnn_operator.reconcile.actions import act
from distgnn_operator.reconcile.apply import (
    ChildConflict,
    ChildRejected,
    owner_reference,
)
from distgnn_operator.reconcile.fanout import Fanout, in_turn
from distgnn_operator.reconcile.kube_api import (
    DISTGNNJOB,
    KubeApi,
)
from distgnn_operator.reconcile.observe import read_children, to_observed, trainer_zero_ip
from distgnn_operator.reconcile.partition_figures import observe_figures
from distgnn_operator.reconcile.progress import fetch_progress
from distgnn_operator.reconcile.spec_memo import SpecMemo
from distgnn_operator.reconcile.status_writes import (
    ReconcileResult,
    rejections_cleared,
    report_rejection,
    write_status,
)
from distgnn_operator.status import (
    active_deadline,
    compute_status,
    ttl_after_finished,
)
from distgnn_operator.status.capacity_policy import CapacityPolicy
from distgnn_operator.status.compute import DEFAULT_GPU_MEMORY
from distgnn_operator.status.conditions import set_condition
from distgnn_operator.status.timestamps import format_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileOptions:
    """How to reconcile: what the operator's settings and the trigger decide."""

    poll_progress: bool = False
    """GET trainer 0's /progress (the periodic timer does; child events do not)."""
    progress_timeout: float = 1.0
    operator: OperatorPeer | None = None
    child_rejection_limit: int = 5
    """Refusals of a child by the API server (in a row) before the job is Failed."""
    kueue: bool = False
    """Honour the kueue.x-k8s.io/queue-name label: queue the job's pods in Kueue."""
    capacity_policy: CapacityPolicy = CapacityPolicy.warn
    """What a job whose resources cannot hold its capacity plan gets: warn, fail or off."""
    gpu_memory: int = DEFAULT_GPU_MEMORY
    """Bytes of one GPU, for the capacity plan."""
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    fanout: Fanout = in_turn
    """How the independent writes of one stage of the actions go: one after another, or
    together (the operator's setting, :class:`~.fanout.Concurrently`)."""
    memo: SpecMemo = field(default_factory=SpecMemo)
    """Parsed specs, capacity shortfalls and rendered children, kept while a spec is unchanged
    (shared by the reconciles that copy these options)."""


def reconcile_job(
    api: KubeApi, namespace: str, name: str, options: ReconcileOptions
) -> ReconcileResult:
    """Read the job fresh from the API server and reconcile it."""
    job = api.get(DISTGNNJOB, namespace, name)
    if job is None:
        return ReconcileResult(gone=True)
    return _reconcile(api, job, options)


def parse_status(raw: Mapping[str, Any] | None) -> DistGNNJobStatus | None:
    """The job's stored status; an unreadable one (e.g. another version's) counts as none."""
    if not raw:
        return None
    try:
        return DistGNNJobStatus.model_validate(raw)
    except ValidationError:
        log.warning("ignoring an unreadable status: %s", raw)
        return None


def _reconcile(api: KubeApi, job: dict[str, Any], options: ReconcileOptions) -> ReconcileResult:
    """The state machine: Pending, Partitioning, Training, Suspended, Succeeded, Failed."""
    meta = job["metadata"]
    now = options.clock()
    previous = parse_status(job.get("status"))
    result = ReconcileResult(previous_phase=previous.phase if previous else None)
    if meta.get("deletionTimestamp"):
        result.gone = True
        return result
    try:
        spec = options.memo.parse(job.get("spec"))
    except SpecError as err:
        return _invalid(api, job, previous, str(err), now, result)

    ctx = JobContext(
        name=meta["name"],
        namespace=meta["namespace"],
        uid=meta["uid"],
        spec=spec,
        restart_generation=previous.restarts if previous else 0,
        operator=options.operator,
    )
    finished = previous is not None and previous.phase in TERMINAL_PHASES
    gate = None
    if options.kueue:
        gate = kueue_gate.sync_workload(api, job, ctx, owner_reference(job), previous, result)
        if gate is not None and gate.view.admitted:
            ctx = dataclasses.replace(ctx, placements=gate.placements)
    children = read_children(api, ctx, finished=finished)
    progress = None
    if options.poll_progress and previous is not None and previous.phase is Phase.training:
        ip = trainer_zero_ip(children, ctx.restart_generation)
        if ip is not None:
            progress = fetch_progress(ip, spec.metrics_port, options.progress_timeout)
    observed = to_observed(ctx, children, progress)
    if gate is not None:
        observed = dataclasses.replace(
            observed, admission=gate.view, blockers=(*gate.blockers, *observed.blockers)
        )
    status = compute_status(
        spec,
        observed,
        previous,
        now,
        generation=meta.get("generation"),
        capacity=options.capacity_policy,
        gpu_memory=options.gpu_memory,
        shortfalls=options.memo.shortfalls(spec, options.capacity_policy, options.gpu_memory),
    )
    result.phase = status.phase
    result.restarts = status.restarts
    ctx = dataclasses.replace(
        ctx,
        restart_generation=status.restarts,
        partition_reused=bool(status.partition and status.partition.reused),
    )

    acting = gate is None or gate.error is None  # a Kueue error leaves the children alone
    written = [job]

    def write() -> None:
        written[0] = write_status(api, job, previous, status, now, result)

    # A job on its way writes its status together with its actions (act() says which of
    # them wait for it); a finished one writes it first.
    together = acting and status.phase not in TERMINAL_PHASES
    if not together:
        write()
    if ttl_after_finished.expired(spec, status, now):
        ttl = spec.run_policy.ttl_seconds_after_finished
        events.record(api, written[0], "Normal", *TTL_EXPIRED.format(ttl=ttl), now)
        result.deleted = api.delete(DISTGNNJOB, ctx.namespace, ctx.name, uid=ctx.uid)
        result.actions.append("delete job (TTL)")
        return result
    try:
        if acting:
            first = write if together else None
            restarted = status.restarts != (previous.restarts if previous else 0)
            act(
                api,
                job,
                ctx,
                status,
                children,
                result,
                options.memo,
                options.fanout,
                first,
                restarted=restarted,
            )
    except ChildConflict as conflict:
        # A child's name is taken by someone else's object: say so and keep retrying.
        reason, message = CHILD_CONFLICT.format(kind=conflict.kind, name=conflict.name)
        events.record(api, written[0], "Warning", reason, message, now)
        result.actions.append(f"conflict {conflict.kind} {conflict.name}")
        raise
    except ChildRejected as rejected:
        job = written[0]
        report_rejection(api, job, status, rejected, now, result, options.child_rejection_limit)
        return result
    job = written[0]
    if gate is not None:
        kueue_gate.after_act(api, gate, status, children, format_time(now), result)
    if status.child_rejections:
        write_status(api, job, status, rejections_cleared(status, now), now, result)
    result.partition_figures = observe_figures(api, ctx, children)
    result.requeue_after = _requeue_after(spec, status, now)
    return result


def _requeue_after(spec: DistGNNJobSpec, status: DistGNNJobStatus, now: datetime) -> float | None:
    """Seconds until a deadline or a TTL falls due, so a timer can come back in time."""
    waits = [
        ttl_after_finished.seconds_left(spec, status, now),
        active_deadline.seconds_left(spec, status.start_time, now)
        if status.phase in (Phase.pending, Phase.partitioning, Phase.training)
        else None,
    ]
    due = [max(0.0, w) for w in waits if w is not None]
    return min(due) if due else None


def _invalid(
    api: KubeApi,
    job: dict[str, Any],
    previous: DistGNNJobStatus | None,
    error: str,
    now: datetime,
    result: ReconcileResult,
) -> ReconcileResult:
    """A spec the API server let through but the models reject (e.g. an older CRD): Failed."""
    prev = previous or DistGNNJobStatus()
    if prev.phase is Phase.failed:
        return result
    reason, message = INVALID_SPEC.format(error=error)
    status = prev.model_copy(
        update={
            "phase": Phase.failed,
            "completion_time": format_time(now),
            "conditions": set_condition(
                prev.conditions, COND_FAILED, "True", reason, message, format_time(now)
            ),
        }
    )
    result.phase = Phase.failed
    write_status(api, job, previous, status, now, result)
    return result
