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
