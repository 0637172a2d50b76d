"""Failure policy: gang restart bounded by backoffLimit; bad input and partition failures fail."""

from __future__ import annotations

import pytest

from distgnn_api.contract import EXIT_BAD_INPUT, Role
from distgnn_operator.status import Observed, PartitionJobView, PodView
from distgnn_operator.status.failure_policy import Action, evaluate, partition_failure
from tests.operator.factories import make_spec, pods, raw_job, raw_pod


def view(role: Role, rank: int, **kwargs: object) -> PodView:
    v = PodView.from_pod(raw_pod("demo", role, rank, **kwargs))  # type: ignore[arg-type]
    assert v is not None
    return v


@pytest.mark.parametrize(
    ("restarts", "limit", "exit_code", "action", "reason"),
    [
        (0, 3, 1, Action.restart, "GangRestart"),
        (2, 3, 137, Action.restart, "GangRestart"),
        (3, 3, 1, Action.fail, "BackoffLimitExceeded"),
        (0, 0, 1, Action.fail, "BackoffLimitExceeded"),
        (0, 3, EXIT_BAD_INPUT, Action.fail, "BadInput"),
    ],
)
def test_decision_by_restarts_and_exit_code(
    restarts: int, limit: int, exit_code: int, action: Action, reason: str
) -> None:
    spec = make_spec(runPolicy={"backoffLimit": limit})
    healthy = pods("demo", spec, generation=restarts)
    failed = view(Role.trainer, 1, generation=restarts, exit_code=exit_code)
    observed = Observed(pods=(*[p for p in healthy if p.name != failed.name], failed))
    decision = evaluate(spec, observed, restarts)
    assert decision is not None
    assert (decision.action, decision.reason) == (action, reason)
    assert "demo-trainer-1" in decision.message
    assert f"code {exit_code}" in decision.message


def test_sampler_failure_and_kubelet_restarted_failure_count() -> None:
    spec = make_spec()
    sampler = Observed(pods=(view(Role.sampler, 0, exit_code=1),))
    restarted = Observed(pods=(view(Role.trainer, 0, last_exit_code=139),))
    for observed in (sampler, restarted):
        decision = evaluate(spec, observed, 0)
        assert decision is not None
        assert decision.action is Action.restart


def test_old_generation_and_deleting_pods_are_ignored() -> None:
    spec = make_spec()
    observed = Observed(
        pods=(
            view(Role.trainer, 0, generation=0, exit_code=1),
            view(Role.trainer, 1, generation=1, exit_code=1, deleting=True),
            view(Role.trainer, 0, generation=1),
        )
    )
    assert evaluate(spec, observed, 1) is None


def test_healthy_and_exited_ok_pods_are_no_failure() -> None:
    spec = make_spec()
    assert evaluate(spec, Observed(pods=pods("demo", spec)), 0) is None
    assert evaluate(spec, Observed(pods=pods("demo", spec, exit_code=0)), 0) is None


def test_partition_job_failure_carries_the_jobs_reason() -> None:
    job = PartitionJobView.from_job(raw_job("demo-partition", failed="BackoffLimitExceeded"))
    result = partition_failure(job)
    assert result is not None
    reason, message = result
    assert reason == "BackoffLimitExceeded"
    assert "demo-partition" in message
    assert "backoff limit" in message
    assert partition_failure(PartitionJobView.from_job(raw_job("p", complete=True))) is None
    assert partition_failure(None) is None
