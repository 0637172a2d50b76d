"""The pure parts of the Kueue integration: reading a Workload, the Workload a job asks for,
merging an admission's placement into pod templates, and the Queued stage of the status."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from distgnn_api.contract import Role
from distgnn_api.spec import DistGNNJobSpec, DistGNNJobStatus, Phase
from distgnn_operator import naming
from distgnn_operator.builders import (
    JobContext,
    Placement,
    PlacementConflict,
    build_statefulset,
    build_workload,
)
from distgnn_operator.builders.placement import place
from distgnn_operator.status import compute_status
from distgnn_operator.status.admission import AdmissionView
from distgnn_operator.status.conditions import find
from tests.operator.factories import T0, condition, make_spec, partition_done

GPU = "nvidia.com/gpu"


def workload(*conditions: tuple[str, str, str, str], admission: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": "x"}
            for t, s, r, m in conditions
        ]
    }
    if admission is not None:
        status["admission"] = admission
    return {"metadata": {"name": "distgnnjob-demo-abcde"}, "status": status}


ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [
        {"name": "trainer", "flavors": {GPU: "pool-b", "cpu": "pool-b"}, "count": 2},
        {"name": "sampler", "flavors": {}, "count": 2},
    ],
}


def test_a_new_workload_waits_without_a_reason() -> None:
    view = AdmissionView.from_workload({"metadata": {"name": "w"}}, "user")
    assert (view.admitted, view.evicted, view.reserved, view.reason) == (False, False, False, "")


def test_a_pending_workload_carries_kueues_reason() -> None:
    view = AdmissionView.from_workload(
        workload(("QuotaReserved", "False", "Pending", "insufficient quota for nvidia.com/gpu")),
        "user",
    )
    assert not view.admitted
    assert (view.reason, view.message) == ("Pending", "insufficient quota for nvidia.com/gpu")


def test_an_admitted_workload_names_its_flavors_once() -> None:
    view = AdmissionView.from_workload(
        workload(
            ("QuotaReserved", "True", "QuotaReserved", "reserved in cq"),
            ("Admitted", "True", "Admitted", "The workload is admitted"),
            admission=ADMISSION,
        ),
        "user",
    )
    assert view.admitted
    assert view.reserved
    assert view.cluster_queue == "cq"
    assert view.flavors == {"trainer": ("pool-b",), "sampler": ()}
    assert view.reason == "Admitted"


def test_an_evicted_workload_is_not_admitted_and_says_why() -> None:
    view = AdmissionView.from_workload(
        workload(
            ("QuotaReserved", "True", "QuotaReserved", ""),
            ("Admitted", "True", "Admitted", ""),
            ("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
            admission=ADMISSION,
        ),
        "user",
    )
    assert not view.admitted
    assert view.evicted
    assert view.reserved
    assert view.flavors == {}
    assert (view.reason, view.message) == ("Preempted", "Preempted to accommodate a workload")


def ctx(**overrides: Any) -> JobContext:
    return JobContext(name="demo", namespace="ns", uid="uid-1", spec=make_spec(**overrides))


def test_the_workload_asks_for_every_role_as_one_gang() -> None:
    wl = build_workload(ctx(), "user", "high", 1000)
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert wl["metadata"]["name"] == naming.workload_name("demo", "uid-1")
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == "uid-1"
    spec = wl["spec"]
    assert spec["queueName"] == "user"
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high",
    }  # fmt: skip
    assert spec["priority"] == 1000
    assert spec["active"] is True
    assert [(p["name"], p["count"]) for p in spec["podSets"]] == [
        ("partition", 1), ("sampler", 2), ("trainer", 2),
    ]  # fmt: skip
    (trainer,) = [p for p in spec["podSets"] if p["name"] == "trainer"]
    (container,) = trainer["template"]["spec"]["containers"]
    assert container["resources"]["requests"][GPU] == "1"
    assert set(container) == {"name", "image", "resources"}


def test_worker_mode_has_no_sampler_pod_set_and_suspend_deactivates() -> None:
    wl = build_workload(
        ctx(samplers={"replicas": 0}, runPolicy={"suspend": True}), "user", None, None
    )
    assert [p["name"] for p in wl["spec"]["podSets"]] == ["partition", "trainer"]
    assert wl["spec"]["active"] is False
    assert "priorityClassRef" not in wl["spec"]
    assert "priority" not in wl["spec"]


def test_workload_names_are_per_job_uid_and_fit_a_label() -> None:
    longest = "j" * 44
    assert naming.workload_name(longest, "a") != naming.workload_name(longest, "b")
    assert len(naming.workload_name(longest, "a")) <= 63


def test_placement_merges_into_the_role_template() -> None:
    toleration = {"key": "pool", "operator": "Equal", "value": "b", "effect": "NoSchedule"}
    placed = dataclasses.replace(
        ctx(scheduling={"nodeSelector": {"zone": "z1"}}),
        placements={
            Role.trainer: Placement(
                node_selector={"pool": "b"},
                tolerations=(toleration, toleration),
                labels={"from-check": "yes"},
            )
        },
    )
    pod = build_statefulset(placed, Role.trainer)["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"zone": "z1", "pool": "b"}
    assert pod["spec"]["tolerations"] == [toleration]
    assert pod["metadata"]["labels"]["from-check"] == "yes"
    sampler = build_statefulset(placed, Role.sampler)["spec"]["template"]
    assert sampler["spec"]["nodeSelector"] == {"zone": "z1"}
    # The template hash changes with the placement: the StatefulSet is re-applied.
    plain = build_statefulset(ctx(scheduling={"nodeSelector": {"zone": "z1"}}), Role.trainer)
    assert (
        plain["metadata"]["annotations"]["distgnn.io/template-hash"]
        != build_statefulset(placed, Role.trainer)["metadata"]["annotations"][
            "distgnn.io/template-hash"
        ]
    )


def test_a_flavor_that_contradicts_the_jobs_node_selector_is_an_error() -> None:
    with pytest.raises(PlacementConflict, match=r"spec.scheduling.nodeSelector sets pool=a"):
        place({}, {"nodeSelector": {"pool": "a"}}, Placement(node_selector={"pool": "b"}))


ADMITTED_TO_CQ = AdmissionView(
    workload="w", queue="user", admitted=True, reserved=True, cluster_queue="cq",
    reason="Admitted",
)  # fmt: skip
PREEMPTED = AdmissionView(
    workload="w", queue="user", evicted=True, reserved=True, reason="Preempted",
    message="Preempted to accommodate a workload",
)  # fmt: skip


def status_with(
    spec: DistGNNJobSpec, admission: AdmissionView, previous: DistGNNJobStatus | None, day: int
) -> DistGNNJobStatus:
    """The status of a partitioned job whose Workload is ``admission``, ``day`` days after T0."""
    observed = dataclasses.replace(partition_done(), admission=admission)
    return compute_status(spec, observed, previous, T0 + timedelta(day))


def test_a_queued_job_is_queued_with_kueues_reason_then_admitted() -> None:
    spec = make_spec()
    waiting = AdmissionView(
        workload="w", queue="user", reason="Pending", message="insufficient quota"
    )
    s0 = status_with(spec, waiting, None, 0)
    assert s0.phase is Phase.queued
    assert s0.start_time is None
    cond = condition(s0, "Queued")
    assert (cond.status, cond.reason, cond.message) == ("True", "Pending", "insufficient quota")
    assert s0.kueue is not None
    assert (s0.kueue.admitted, s0.kueue.reason) == (False, "Pending")

    s1 = status_with(spec, ADMITTED_TO_CQ, s0, 1)
    assert s1.phase is Phase.training
    cond = condition(s1, "Queued")
    assert (cond.status, cond.reason) == ("False", "Admitted")
    assert "cq" in cond.message

    s2 = status_with(spec, PREEMPTED, s1, 2)
    assert s2.phase is Phase.queued
    cond = condition(s2, "Queued")
    assert (cond.status, cond.reason) == ("True", "Preempted")
    training = condition(s2, "Training")
    assert training.status == "False"


def test_a_users_suspend_wins_over_kueue() -> None:
    spec = make_spec(runPolicy={"suspend": True})
    admitted = AdmissionView(workload="w", queue="user", admitted=True, reason="Admitted")
    assert status_with(spec, admitted, None, 0).phase is Phase.suspended


def test_a_job_without_the_label_has_no_kueue_status() -> None:
    status = compute_status(make_spec(), partition_done(), None, T0)
    assert status.kueue is None
    assert find(status.conditions, "Queued") is None


def test_a_kueue_error_keeps_the_job_queued_blocked_and_warned() -> None:
    from distgnn_operator.reconcile import events
    from distgnn_operator.reconcile.kueue_gate import Gate, KueueError
    from distgnn_operator.status import Observed

    gate = Gate.failed(
        "distgnnjob-demo-abcde",
        "user",
        KueueError("WorkloadPriorityClass 'nosuch' ... does not exist"),
    )
    assert gate.workload is None
    observed = Observed(admission=gate.view, blockers=gate.blockers)
    status = compute_status(make_spec(), observed, None, T0)
    assert status.phase is Phase.queued
    queued = find(status.conditions, "Queued")
    blocked = find(status.conditions, "Blocked")
    assert queued is not None
    assert blocked is not None
    assert (queued.status, queued.reason) == ("True", "KueueError")
    assert (blocked.status, blocked.reason) == ("True", "KueueError")
    assert "'nosuch'" in blocked.message
    assert "creates no pods until this is fixed" in blocked.message
    assert events.transitions(None, status) == [("Warning", "KueueError", blocked.message)]
