"""Prometheus metrics of the operator: module-level objects with the ``distgnn_operator_`` prefix,
and the ``distgnn_partition_*`` figures of each job's partition.

The operator is the long-lived, scraped process, so it exports what short-lived pods cannot:
the partition Job's figures (read from its termination message, kept on the claim, so a
reused partition has them too). Per-job series carry ``namespace`` and ``job`` (the
DistGNNJob's name); the ServiceMonitor keeps them (``honorLabels``) so they match the job
pods' series. A job's series go away with the job.
"""

from __future__ import annotations

import contextlib
import time

from prometheus_client import Counter, Gauge, Histogram

from distgnn_api.contract import PartitionFigures

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
API_REQUESTS = Counter(
    "distgnn_operator_api_requests_total",
    "Requests the reconciler sent to the API server (kopf's watches and patches aside), by "
    "verb and resource.",
    ["verb", "resource"],
)

JOB_PHASE_START = Gauge(
    "distgnn_operator_job_phase_start_time_seconds",
    "Unix time at which this operator saw the job enter its current phase.",
    ["namespace", "job", "phase"],
)
JOB_RESTARTS = Gauge(
    "distgnn_operator_job_restarts", "Gang restarts of the job so far.", ["namespace", "job"]
)

# ---- the job's partition (one series per job, whether it partitioned or reused)
PARTITION_STEP_SECONDS = Gauge(
    "distgnn_partition_step_seconds",
    "Duration of each step of the partition the job trains on.",
    ["namespace", "job", "step"],
)
PARTITION_EDGE_CUT = Gauge(
    "distgnn_partition_edge_cut",
    "Undirected edges cut by the partition the job trains on.",
    ["namespace", "job"],
)
PARTITION_EDGE_CUT_FRACTION = Gauge(
    "distgnn_partition_edge_cut_fraction",
    "Share of undirected edges cut by the partition.",
    ["namespace", "job"],
)
PARTITION_BALANCE = Gauge(
    "distgnn_partition_balance",
    "Largest over mean partition, by weight (nodes, train, edges).",
    ["namespace", "job", "weight"],
)
PARTITION_PARTITIONS = Gauge(
    "distgnn_partition_partitions", "Partitions of the job's partition set.", ["namespace", "job"]
)


# --------------------------------------------------------------------------- helpers

_PHASE_OF: dict[str, tuple[str, str]] = {}
"""Last phase counted in JOBS_BY_PHASE for each job (key: namespace/name)."""


_JOB_SERIES: dict[str, set[tuple[Gauge, tuple[str, ...]]]] = {}
"""The per-job series set for each job (key: namespace/name), to remove them with the job."""


def observe_phase(namespace: str, name: str, phase: str) -> None:
    """Count a job in its current phase (moving it out of the previous one)."""
    key = f"{namespace}/{name}"
    current = (namespace, phase)
    before = _PHASE_OF.get(key)
    if before == current:
        return
    if before is not None:
        JOBS_BY_PHASE.labels(*before).dec()
        _remove(JOB_PHASE_START, (namespace, name, before[1]))
    JOBS_BY_PHASE.labels(*current).inc()
    JOB_PHASE_START.labels(namespace, name, phase).set(time.time())
    _PHASE_OF[key] = current


def observe_job(namespace: str, name: str, restarts: int, figures: PartitionFigures | None) -> None:
    """Export a job's restart count and its partition's figures (once they are known)."""
    values: dict[tuple[Gauge, tuple[str, ...]], float] = {
        (JOB_RESTARTS, (namespace, name)): restarts
    }
    if figures is not None:
        job = (namespace, name)
        values[(PARTITION_EDGE_CUT, job)] = figures.edge_cut
        values[(PARTITION_EDGE_CUT_FRACTION, job)] = figures.edge_cut_fraction
        values[(PARTITION_PARTITIONS, job)] = figures.num_partitions
        for step, seconds in figures.step_seconds.items():
            values[(PARTITION_STEP_SECONDS, (*job, step))] = seconds
        for weight, ratio in figures.balance.items():
            values[(PARTITION_BALANCE, (*job, weight))] = ratio
    key = f"{namespace}/{name}"
    for gauge, labels in _JOB_SERIES.get(key, set()) - set(values):
        gauge.remove(*labels)
    for (gauge, labels), value in values.items():
        gauge.labels(*labels).set(value)
    _JOB_SERIES[key] = set(values)


def forget_job(namespace: str, name: str) -> None:
    """Stop counting a deleted job and remove its series."""
    before = _PHASE_OF.pop(f"{namespace}/{name}", None)
    if before is not None:
        JOBS_BY_PHASE.labels(*before).dec()
        _remove(JOB_PHASE_START, (namespace, name, before[1]))
    for gauge, labels in _JOB_SERIES.pop(f"{namespace}/{name}", set()):
        gauge.remove(*labels)


def _remove(gauge: Gauge, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


def count_api_request(verb: str, resource: str) -> None:
    """Count one request of the reconciler to the API server."""
    API_REQUESTS.labels(verb=verb, resource=resource).inc()


def record_transition(from_phase: str | None, to_phase: str, failure_reason: str | None) -> None:
    """Count a phase transition, and a job that finished."""
    PHASE_TRANSITIONS.labels(from_phase=from_phase or "", to_phase=to_phase).inc()
    if to_phase == "Succeeded":
        JOBS_SUCCEEDED.inc()
    elif to_phase == "Failed":
        JOBS_FAILED.labels(reason=failure_reason or "Unknown").inc()
