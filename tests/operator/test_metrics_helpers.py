"""Operator metric helpers: jobs by phase move with the job; transitions and outcomes count."""

from __future__ import annotations

from prometheus_client import REGISTRY

from distgnn_operator import metrics


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
