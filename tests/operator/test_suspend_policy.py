"""Suspend policy: Suspended from any active phase, resume continues where the job was."""

from __future__ import annotations

from datetime import timedelta

from distgnn_api.spec import Phase
from distgnn_operator.status import Observed, compute_status
from distgnn_operator.status.suspend_policy import is_suspended
from tests.operator.factories import T0, condition, make_spec, partition_done, pods


def test_is_suspended_reads_the_run_policy() -> None:
    assert is_suspended(make_spec(runPolicy={"suspend": True}))
    assert not is_suspended(make_spec())


def test_suspend_while_training_then_resume() -> None:
    spec = make_spec()
    running = Observed(partition_job=partition_done().partition_job, pods=pods("demo", spec))
    training = compute_status(spec, running, None, T0)
    assert training.phase is Phase.training
    suspended_spec = make_spec(runPolicy={"suspend": True})
    suspended = compute_status(
        suspended_spec, partition_done(), training, T0 + timedelta(seconds=5)
    )
    assert suspended.phase is Phase.suspended
    assert suspended.start_time is None
    cond = condition(suspended, "Suspended")
    assert (cond.status, cond.reason) == ("True", "JobSuspended")
    train_cond = condition(suspended, "Training")
    assert train_cond.status == "False"
    resumed = compute_status(spec, partition_done(), suspended, T0 + timedelta(seconds=9))
    assert resumed.phase is Phase.training
    assert resumed.start_time == "2026-11-26T12:00:09Z"
    cond = condition(resumed, "Suspended")
    assert (cond.status, cond.reason) == ("False", "JobResumed")
    train_cond = condition(resumed, "Training")
    assert train_cond.status == "True"


def test_suspended_from_creation_is_suspended_not_pending() -> None:
    status = compute_status(make_spec(runPolicy={"suspend": True}), Observed(), None, T0)
    assert status.phase is Phase.suspended
    assert status.start_time is None
