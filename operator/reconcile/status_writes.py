"""Writing a job's status, and reporting a refused child in it.

The status is replaced only when it changed, and only if the stored status is still the one
the reconcile read (a stale read conflicts); every condition that changed becomes an Event. A child the API server refuses is counted in the
status (childRejections), shown in the Blocked condition and an Event that quote the API
server, and fails the job at the operator's limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from distgnn_api.contract import PartitionFigures
from distgnn_api.spec import DistGNNJobStatus, Phase
from distgnn_operator.constants import (
    CHILD_REJECTED,
    CHILD_REJECTED_FAILED,
    COND_BLOCKED,
    COND_FAILED,
    UNBLOCKED,
)
from distgnn_operator.reconcile import events
from distgnn_operator.reconcile.apply import ChildRejected
from distgnn_operator.reconcile.kube_api import KubeApi
from distgnn_operator.status.conditions import set_condition
from distgnn_operator.status.timestamps import format_time


@dataclass
class ReconcileResult:
    """What happened, for metrics, logs and requeueing."""

    previous_phase: Phase | None = None
    phase: Phase | None = None
    failure_reason: str | None = None
    restarts: int = 0
    partition_figures: PartitionFigures | None = None
    deleted: bool = False
    gone: bool = False
    status_written: bool = False
    requeue_after: float | None = None
    actions: list[str] = field(default_factory=list)

    @property
    def transitioned(self) -> bool:
        return self.phase is not None and self.phase != self.previous_phase


def write_status(
    api: KubeApi,
    job: dict[str, Any],
    previous: DistGNNJobStatus | None,
    status: DistGNNJobStatus,
    now: datetime,
    result: ReconcileResult,
) -> dict[str, Any]:
    """Replace the status when it changed, if the stored one is still the one read: a stale
    read conflicts, and a stale status never overwrites a newer one. kopf's own patches of
    the job (its finalizer, its annotations) leave the status alone, so they do not conflict."""
    if previous == status:
        return job
    updated = api.replace_status(job, status.model_dump(mode="json", by_alias=True))
    result.status_written = True
    failed = next(
        (c for c in status.conditions if c.type == COND_FAILED and c.status == "True"), None
    )
    if failed is not None and status.phase is Phase.failed:
        result.failure_reason = failed.reason
    for type_, reason, message in events.transitions(previous, status):
        events.record(api, job, type_, reason, message, now)
    return updated


def report_rejection(
    api: KubeApi,
    job: dict[str, Any],
    status: DistGNNJobStatus,
    rejected: ChildRejected,
    now: datetime,
    result: ReconcileResult,
    limit: int,
) -> None:
    """The API server refused a child: say so in Blocked (and an Event quoting it), and fail
    the job at the limit. Below it, raise so the trigger retries with backoff."""
    err = rejected.error
    attempt = status.child_rejections + 1
    values = {
        "kind": rejected.kind,
        "name": rejected.name,
        "code": err.status,
        "status": err.body.get("reason") or err.reason,
        "message": err.message,
    }
    stamp = format_time(now)
    conditions = set_condition(
        status.conditions,
        COND_BLOCKED,
        "True",
        *CHILD_REJECTED.format(attempt=attempt, limit=limit, **values),
        stamp,
    )
    update: dict[str, Any] = {"child_rejections": attempt, "conditions": conditions}
    if attempt >= limit:
        reason, message = CHILD_REJECTED_FAILED.format(attempts=attempt, **values)
        update["conditions"] = set_condition(
            conditions, COND_FAILED, "True", reason, message, stamp
        )
        update["phase"] = Phase.failed
        update["completion_time"] = stamp
    failed = status.model_copy(update=update)
    result.phase = failed.phase
    result.actions.append(f"refused {rejected.kind} {rejected.name} ({attempt} of {limit})")
    write_status(api, job, status, failed, now, result)
    if failed.phase is not Phase.failed:
        raise rejected


def rejections_cleared(status: DistGNNJobStatus, now: datetime) -> DistGNNJobStatus:
    """The status once every child was accepted again: no refusals counted, Blocked false."""
    return status.model_copy(
        update={
            "child_rejections": 0,
            "conditions": set_condition(
                status.conditions, COND_BLOCKED, "False", *UNBLOCKED.format(), format_time(now)
            ),
        }
    )
