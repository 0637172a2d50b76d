"""Active-deadline policy: a job active (not suspended, not finished) longer than
runPolicy.activeDeadlineSeconds fails with DeadlineExceeded. The clock starts at status.startTime,
which a suspension clears, as for a batch Job."""

from __future__ import annotations

from datetime import datetime

from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.status.timestamps import seconds_since


def seconds_left(spec: DistGNNJobSpec, start_time: str | None, now: datetime) -> float | None:
    """Seconds until the deadline, negative once past; None without a deadline or a start."""
    limit = spec.run_policy.active_deadline_seconds
    elapsed = seconds_since(start_time, now)
    if limit is None or elapsed is None:
        return None
    return limit - elapsed


def exceeded(spec: DistGNNJobSpec, start_time: str | None, now: datetime) -> bool:
    """True once the job has been active for activeDeadlineSeconds."""
    left = seconds_left(spec, start_time, now)
    return left is not None and left <= 0
