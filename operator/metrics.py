"""Prometheus metrics of the operator: module-level objects with the ``distgnn_operator_`` prefix."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS_CREATED = Counter("distgnn_operator_jobs_created_total", "DistGNNJobs first seen.")
JOBS_SUCCEEDED = Counter("distgnn_operator_jobs_succeeded_total", "DistGNNJobs that Succeeded.")
JOBS_FAILED = Counter(
    "distgnn_operator_jobs_failed_total", "DistGNNJobs that Failed, by reason.", ["reason"]
)
JOBS_BY_PHASE = Gauge(
    "distgnn_operator_jobs", "DistGNNJobs currently in each phase.", ["namespace", "phase"]
)
PHASE_TRANSITIONS = Counter(
    "distgnn_operator_phase_transitions_total", "Phase transitions.", ["from_phase", "to_phase"]
)
RECONCILE_SECONDS = Histogram(
    "distgnn_operator_reconcile_seconds",
    "Duration of one reconcile of one DistGNNJob.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
RECONCILE_ERRORS = Counter(
    "distgnn_operator_reconcile_errors_total", "Reconciles that raised.", ["kind"]
)


# --------------------------------------------------------------------------- helpers

_PHASE_OF: dict[str, tuple[str, str]] = {}
"""Last phase counted in JOBS_BY_PHASE for each job (key: namespace/name)."""


def observe_phase(namespace: str, name: str, phase: str) -> None:
    """Count a job in its current phase (moving it out of the previous one)."""
    key = f"{namespace}/{name}"
    current = (namespace, phase)
    before = _PHASE_OF.get(key)
    if before == current:
        return
    if before is not None:
        JOBS_BY_PHASE.labels(*before).dec()
    JOBS_BY_PHASE.labels(*current).inc()
    _PHASE_OF[key] = current


def forget_job(namespace: str, name: str) -> None:
    """Stop counting a deleted job."""
    before = _PHASE_OF.pop(f"{namespace}/{name}", None)
    if before is not None:
        JOBS_BY_PHASE.labels(*before).dec()


def record_transition(from_phase: str | None, to_phase: str, failure_reason: str | None) -> None:
    """Count a phase transition, and a job that finished."""
    PHASE_TRANSITIONS.labels(from_phase=from_phase or "", to_phase=to_phase).inc()
    if to_phase == "Succeeded":
        JOBS_SUCCEEDED.inc()
    elif to_phase == "Failed":
        JOBS_FAILED.labels(reason=failure_reason or "Unknown").inc()
