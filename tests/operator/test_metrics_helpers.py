"""Operator metric helpers: jobs by phase move with the job; transitions and outcomes count."""

from __future__ import annotations

from prometheus_client import REGISTRY

from distgnn_operator import metrics
from tests.operator.factories import FIGURES


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_jobs_by_phase_follow_each_job() -> None:
    ns = "metrics-test"
    metrics.observe_phase(ns, "a", "Training")
    metrics.observe_phase(ns, "b", "Training")
    assert sample("distgnn_operator_jobs", namespace=ns, phase="Training") == 2
    metrics.observe_phase(ns, "a", "Succeeded")
    metrics.observe_phase(ns, "a", "Succeeded")
    assert sample("distgnn_operator_jobs", namespace=ns, phase="Training") == 1
    assert sample("distgnn_operator_jobs", namespace=ns, phase="Succeeded") == 1
    metrics.forget_job(ns, "a")
    metrics.forget_job(ns, "b")
    metrics.forget_job(ns, "never-seen")
    assert sample("distgnn_operator_jobs", namespace=ns, phase="Succeeded") == 0
    assert sample("distgnn_operator_jobs", namespace=ns, phase="Training") == 0


def test_transitions_and_outcomes_count() -> None:
    before = (
        sample(
            "distgnn_operator_phase_transitions_total", from_phase="Training", to_phase="Failed"
        ),
        sample("distgnn_operator_jobs_failed_total", reason="DeadlineExceeded"),
        sample("distgnn_operator_jobs_succeeded_total"),
    )
    metrics.record_transition("Training", "Failed", "DeadlineExceeded")
    metrics.record_transition("Training", "Succeeded", None)
    after = (
        sample(
            "distgnn_operator_phase_transitions_total", from_phase="Training", to_phase="Failed"
        ),
        sample("distgnn_operator_jobs_failed_total", reason="DeadlineExceeded"),
        sample("distgnn_operator_jobs_succeeded_total"),
    )
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 1, 1]


def test_job_series_follow_the_job_and_its_partition() -> None:
    ns = "metrics-job"
    metrics.observe_phase(ns, "a", "Partitioning")
    started = sample(
        "distgnn_operator_job_phase_start_time_seconds", namespace=ns, job="a", phase="Partitioning"
    )
    assert started > 0
    metrics.observe_job(ns, "a", 0, None)
    assert sample("distgnn_operator_job_restarts", namespace=ns, job="a") == 0
    # No figures yet: no partition series at all, not a 0.
    assert (
        REGISTRY.get_sample_value("distgnn_partition_edge_cut", {"namespace": ns, "job": "a"})
        is None
    )

    metrics.observe_phase(ns, "a", "Training")
    metrics.observe_job(ns, "a", 2, FIGURES)
    assert (
        REGISTRY.get_sample_value(
            "distgnn_operator_job_phase_start_time_seconds",
            {"namespace": ns, "job": "a", "phase": "Partitioning"},
        )
        is None
    )
    assert sample("distgnn_operator_job_restarts", namespace=ns, job="a") == 2
    assert sample("distgnn_partition_edge_cut", namespace=ns, job="a") == 161_601
    assert sample("distgnn_partition_step_seconds", namespace=ns, job="a", step="generate") == 1.5
    assert sample("distgnn_partition_balance", namespace=ns, job="a", weight="edges") == 1.04
    assert sample("distgnn_partition_partitions", namespace=ns, job="a") == 2

    metrics.forget_job(ns, "a")
    for name, labels in (
        ("distgnn_partition_edge_cut", {}),
        ("distgnn_partition_step_seconds", {"step": "write"}),
        ("distgnn_operator_job_restarts", {}),
        ("distgnn_operator_job_phase_start_time_seconds", {"phase": "Training"}),
    ):
        assert REGISTRY.get_sample_value(name, {"namespace": ns, "job": "a", **labels}) is None, (
            name
        )
