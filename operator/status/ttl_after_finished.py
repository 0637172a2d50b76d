"""TTL-after-finished policy: a Succeeded or Failed job is deleted ttlSecondsAfterFinished after
its completionTime; its children follow through their ownerReferences."""

from __future__ import annotations

from datetime import datetime

from distgnn_api.spec import TERMINAL_PHASES, DistGNNJobSpec, DistGNNJobStatus
from distgnn_operator.status.timestamps import seconds_since


def seconds_left(spec: DistGNNJobSpec, status: DistGNNJobStatus, now: datetime) -> float | None:
    """Seconds until the job is deleted, negative once due; None when it is not finished or has no TTL."""
    ttl = spec.run_policy.ttl_seconds_after_finished
    if ttl is None or status.phase not in TERMINAL_PHASES:
        return None
    elapsed = seconds_since(status.completion_time, now)
    return None if elapsed is None else ttl - elapsed


def expired(spec: DistGNNJobSpec, status: DistGNNJobStatus, now: datetime) -> bool:
    """True once a finished job's TTL has passed."""
    left = seconds_left(spec, status, now)
    return left is not None and left <= 0
