"""Failure policy: a sampler or trainer that exits non-zero triggers a gang restart of every pod,
up to runPolicy.backoffLimit restarts; past it, or on a bad-input exit, the job fails.

Only pods of the current restart generation count: the pods of an earlier generation are the
ones a gang restart is replacing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from distgnn_api.contract import EXIT_BAD_INPUT, Role
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.constants import (
    BACKOFF_LIMIT_EXCEEDED,
    BAD_INPUT,
    GANG_RESTART,
    PARTITION_FAILED,
)
from distgnn_operator.status.observed import Observed, PartitionJobView


class Action(StrEnum):
    restart = "Restart"
    fail = "Fail"


@dataclass(frozen=True)
class FailureDecision:
    """What to do about a failed pod."""

    action: Action
    reason: str
    message: str


def evaluate(spec: DistGNNJobSpec, observed: Observed, restarts: int) -> FailureDecision | None:
    """Restart or fail when a pod of the current generation has a non-zero exit; else None."""
    pods = [
        p
        for role in (Role.trainer, Role.sampler)
        for p in sorted(observed.current_pods(role, restarts), key=lambda p: (p.rank or 0, p.name))
        if p.failures()
    ]
    if not pods:
        return None
    pod = pods[0]
    exit_ = pod.failures()[0]
    limit = spec.run_policy.backoff_limit
    values = {"pod": pod.name, "container": exit_.container, "exit_code": exit_.exit_code}
    if exit_.exit_code == EXIT_BAD_INPUT:
        return FailureDecision(Action.fail, *BAD_INPUT.format(**values))
    if restarts >= limit:
        return FailureDecision(
            Action.fail, *BACKOFF_LIMIT_EXCEEDED.format(**values, restarts=restarts, limit=limit)
        )
    return FailureDecision(
        Action.restart, *GANG_RESTART.format(**values, restarts=restarts + 1, limit=limit)
    )


def partition_failure(job: PartitionJobView | None) -> tuple[str, str] | None:
    """The Failed reason and message when the partition Job failed: the Job's own reason."""
    if job is None or not job.failed:
        return None
    _, message = PARTITION_FAILED.format(
        job=job.name, job_reason=job.reason, job_message=job.message or "no message"
    )
    return job.reason or PARTITION_FAILED.reason, message
