"""Capacity policy: CapacityFits=False while the resources cannot hold the plan, True again once
they can; fail fails the job only before training starts; off checks nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from distgnn_api.spec import DistGNNJobSpec, Phase
from distgnn_operator.reconcile.events import transitions
from distgnn_operator.status import Observed, compute_status
from distgnn_operator.status.capacity_policy import CapacityPolicy
from distgnn_operator.status.conditions import find
from tests.operator.factories import T0, condition, make_spec, partition_done

SHORT: dict[str, Any] = {"resources": {"limits": {"memory": "256Mi"}}}


def short_spec() -> DistGNNJobSpec:
    return make_spec(trainers={"replicas": 2, "gpusPerPod": 0, **SHORT})


def test_warn_sets_the_condition_and_a_warning_then_clears() -> None:
    spec = short_spec()
    s0 = compute_status(spec, Observed(partition_job_name="demo-partition"), None, T0)
    cond = condition(s0, "CapacityFits")
    assert (cond.status, cond.reason) == ("False", "InsufficientCapacity")
    assert "spec.trainers.resources.limits.memory" in cond.message
    assert s0.phase is Phase.pending
    assert ("Warning", "InsufficientCapacity") in [(t, r) for t, r, _ in transitions(None, s0)]

    fixed = make_spec(trainers={"replicas": 2, "gpusPerPod": 0})
    s1 = compute_status(fixed, Observed(partition_job_name="demo-partition"), s0, T0)
    cond = condition(s1, "CapacityFits")
    assert (cond.status, cond.reason) == ("True", "CapacityFits")


def test_a_job_that_fits_gets_no_condition() -> None:
    spec = make_spec(trainers={"replicas": 2, "gpusPerPod": 0})
    status = compute_status(spec, Observed(partition_job_name="demo-partition"), None, T0)
    assert find(status.conditions, "CapacityFits") is None


def test_fail_before_training_only() -> None:
    spec = short_spec()
    s0 = compute_status(
        spec, Observed(partition_job_name="p"), None, T0, capacity=CapacityPolicy.fail
    )
    assert s0.phase is Phase.failed
    failed = condition(s0, "Failed")
    assert failed.reason == "InsufficientCapacity"

    # a job already training (the policy changed, or the spec) is flagged, not failed
    training = compute_status(spec, partition_done(), None, T0)
    assert training.phase is Phase.training
    s1 = compute_status(
        spec, partition_done(), training, T0 + timedelta(seconds=1), capacity=CapacityPolicy.fail
    )
    assert s1.phase is Phase.training
    cond = condition(s1, "CapacityFits")
    assert cond.status == "False"


def test_off_checks_nothing() -> None:
    status = compute_status(
        short_spec(), Observed(partition_job_name="p"), None, T0, capacity=CapacityPolicy.off
    )
    assert find(status.conditions, "CapacityFits") is None
    assert status.phase is Phase.pending


def test_gpu_memory_setting() -> None:
    spec = make_spec(trainers={"replicas": 2, "gpusPerPod": 1})
    roomy = compute_status(spec, Observed(partition_job_name="p"), None, T0)
    assert find(roomy.conditions, "CapacityFits") is None
    tiny = compute_status(spec, Observed(partition_job_name="p"), None, T0, gpu_memory=1 << 20)
    cond = condition(tiny, "CapacityFits")
    assert "GPU memory per card" in cond.message
    assert "gpuMemoryGiB" in cond.message
