"""compute_status walks Pending -> Partitioning -> Training -> Succeeded | Failed."""

from __future__ import annotations

from datetime import timedelta

from distgnn_api.contract import Role, partition_key
from distgnn_api.spec import DistGNNJobStatus, Phase, Progress
from distgnn_operator.status import Observed, PartitionJobView, PodView, compute_status
from distgnn_operator.status.conditions import find
from tests.operator.factories import (
    T0,
    condition,
    make_spec,
    partition_done,
    pods,
    raw_job,
    raw_pod,
)


def cond(status: DistGNNJobStatus, type_: str) -> tuple[str, str]:
    c = find(status.conditions, type_)
    assert c is not None, f"no {type_} condition in {status.conditions}"
    return c.status, c.reason


def test_happy_path_phases() -> None:
    spec = make_spec()
    s0 = compute_status(spec, Observed(partition_job_name="demo-partition"), None, T0, generation=1)
    assert s0.phase is Phase.pending
    assert s0.observed_generation == 1
    assert cond(s0, "Partitioned") == ("False", "PartitionJobPending")
    assert s0.partition is not None
    assert s0.partition.key == partition_key(spec)
    assert s0.partition.num_partitions == 2
    assert s0.partition.path == f"partitions/{partition_key(spec)}"

    running_job = Observed(partition_job=PartitionJobView.from_job(raw_job("demo-partition")))
    s1 = compute_status(spec, running_job, s0, T0 + timedelta(seconds=1))
    assert s1.phase is Phase.partitioning
    assert cond(s1, "Partitioned") == ("False", "PartitionJobRunning")

    s2 = compute_status(spec, partition_done(), s1, T0 + timedelta(seconds=2))
    assert s2.phase is Phase.training
    assert cond(s2, "Partitioned") == ("True", "PartitionJobSucceeded")
    assert cond(s2, "Training") == ("True", "TrainersStarting")
    assert s2.partition is not None
    assert s2.partition.reused is False

    progress = Progress(epoch=3, epochs=10, seeds_per_second=1234.5)
    live = Observed(pods=pods("demo", spec), progress=progress)
    s3 = compute_status(spec, live, s2, T0 + timedelta(seconds=3))
    assert cond(s3, "Training") == ("True", "TrainersRunning")
    assert s3.progress == progress
    training = condition(s3, "Training")
    assert training.last_transition_time == "2026-11-26T12:00:02Z"

    done = Observed(pods=pods("demo", spec, exit_code=0))
    s4 = compute_status(spec, done, s3, T0 + timedelta(seconds=4))
    assert s4.phase is Phase.succeeded
    assert cond(s4, "Succeeded") == ("True", "TrainersSucceeded")
    assert cond(s4, "Training")[0] == "False"
    assert s4.completion_time == "2026-11-26T12:00:04Z"
    assert s4.progress == progress  # kept when trainer 0 no longer answers

    # Final: nothing the world shows changes a finished job.
    again = compute_status(
        spec, Observed(pods=pods("demo", spec, exit_code=1)), s4, T0 + timedelta(hours=1)
    )
    assert again == s4


def test_reused_partition_skips_partitioning() -> None:
    spec = make_spec(storage={"claimName": "shared"})
    s = compute_status(spec, Observed(partition_marker=True, claim="shared"), None, T0)
    assert s.phase is Phase.training
    assert cond(s, "Partitioned") == ("True", "PartitionReused")
    assert s.partition is not None
    assert s.partition.reused is True
    # Stays reused afterwards, even without the marker in view.
    later = compute_status(spec, Observed(), s, T0 + timedelta(seconds=1))
    assert later.partition is not None
    assert later.partition.reused is True


def test_own_job_complete_with_marker_is_not_reused() -> None:
    spec = make_spec()
    observed = Observed(
        partition_marker=True, partition_job=PartitionJobView.from_job(raw_job("p", complete=True))
    )
    s = compute_status(spec, observed, None, T0)
    assert s.partition is not None
    assert s.partition.reused is False


def test_partition_job_failure_fails_with_its_reason() -> None:
    spec = make_spec()
    observed = Observed(
        partition_job=PartitionJobView.from_job(
            raw_job("demo-partition", failed="DeadlineExceeded")
        )
    )
    s = compute_status(spec, observed, None, T0)
    assert s.phase is Phase.failed
    assert cond(s, "Failed") == ("True", "DeadlineExceeded")
    assert cond(s, "Partitioned") == ("False", "PartitionJobFailed")
    assert s.completion_time is not None


def test_gang_restart_then_backoff_limit() -> None:
    spec = make_spec(runPolicy={"backoffLimit": 1})
    s = compute_status(spec, partition_done(), None, T0)
    failing = PodView.from_pod(raw_pod("demo", Role.trainer, 0, exit_code=1))
    assert failing is not None
    s = compute_status(spec, Observed(pods=(failing,)), s, T0 + timedelta(seconds=1))
    assert s.phase is Phase.training
    assert s.restarts == 1
    assert cond(s, "Training") == ("True", "GangRestart")
    # The same failed pod (generation 0) does not count twice.
    s = compute_status(spec, Observed(pods=(failing,)), s, T0 + timedelta(seconds=2))
    assert s.restarts == 1
    assert s.phase is Phase.training
    again = PodView.from_pod(raw_pod("demo", Role.sampler, 1, generation=1, exit_code=3))
    assert again is not None
    s = compute_status(spec, Observed(pods=(again,)), s, T0 + timedelta(seconds=3))
    assert s.phase is Phase.failed
    assert cond(s, "Failed") == ("True", "BackoffLimitExceeded")
    assert s.restarts == 1


def test_success_wins_over_a_late_sampler_failure() -> None:
    spec = make_spec(trainers={"replicas": 1}, samplers={"replicas": 1})
    s = compute_status(spec, partition_done(), None, T0)
    trainer = PodView.from_pod(raw_pod("demo", Role.trainer, 0, exit_code=0))
    sampler = PodView.from_pod(raw_pod("demo", Role.sampler, 0, exit_code=1))
    assert trainer is not None
    assert sampler is not None
    s = compute_status(spec, Observed(pods=(trainer, sampler)), s, T0)
    assert s.phase is Phase.succeeded


def test_a_trainer_that_finished_still_counts_as_up() -> None:
    spec = make_spec(trainers={"replicas": 2}, samplers={"replicas": 0})
    s = compute_status(spec, partition_done(), None, T0)
    done = PodView.from_pod(raw_pod("demo", Role.trainer, 0, exit_code=0))
    running = PodView.from_pod(raw_pod("demo", Role.trainer, 1))
    assert done is not None
    assert running is not None
    s = compute_status(spec, Observed(pods=(done, running)), s, T0)
    assert s.phase is Phase.training
    assert cond(s, "Training") == ("True", "TrainersRunning")


def test_blockers_set_and_clear_the_blocked_condition() -> None:
    from distgnn_operator.status.blockers import Blocker

    spec = make_spec()
    blocked = compute_status(
        spec,
        Observed(blockers=(Blocker("PodUnschedulable", "pod p cannot be scheduled: no nodes"),)),
        None,
        T0,
    )
    cond = next(c for c in blocked.conditions if c.type == "Blocked")
    assert (cond.status, cond.reason) == ("True", "PodUnschedulable")
    assert blocked.phase.value == "Pending"
    cleared = compute_status(spec, Observed(), blocked, T0)
    cond = next(c for c in cleared.conditions if c.type == "Blocked")
    assert (cond.status, cond.reason) == ("False", "Unblocked")
