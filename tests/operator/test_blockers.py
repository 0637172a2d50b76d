"""What the cluster says about children that cannot start, read from raw objects."""

from __future__ import annotations

from typing import Any

from distgnn_operator.status.blockers import (
    claim_blockers,
    failed_create_blockers,
    pod_blockers,
)


def test_a_named_claim_that_does_not_exist_blocks() -> None:
    (blocker,) = claim_blockers(None, "shared", user_claim=True)
    assert blocker.reason == "ClaimNotFound"
    assert "shared" in blocker.message
    assert claim_blockers(None, "demo-data", user_claim=False) == []
    assert claim_blockers({"status": {"phase": "Pending"}}, "c", user_claim=True) == []
    assert (
        claim_blockers({"status": {"phase": "Lost"}}, "c", user_claim=True)[0].reason == "ClaimLost"
    )


def _job(active: int = 0, uid: str = "u1") -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {"name": "demo-partition", "uid": uid},
        "spec": {},
        "status": {"active": active},
    }


def _event(uid: str, message: str, stamp: str) -> dict[str, Any]:
    return {
        "reason": "FailedCreate",
        "involvedObject": {"uid": uid},
        "message": message,
        "lastTimestamp": stamp,
    }


def test_failed_create_counts_while_the_controller_has_no_pods() -> None:
    events = [
        _event("u1", "old", "2026-01-01T00:00:00Z"),
        _event("u1", 'pods "x" is forbidden: exceeded quota', "2026-01-01T00:01:00Z"),
        _event("other", "not ours", "2026-01-01T00:02:00Z"),
    ]
    (blocker,) = failed_create_blockers([_job()], events)
    assert blocker.reason == "FailedCreate"
    assert "Job demo-partition" in blocker.message
    assert "exceeded quota" in blocker.message
    assert failed_create_blockers([_job(active=1)], events) == []
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "s", "uid": "u2"},
        "spec": {"replicas": 2},
        "status": {"replicas": 1},
    }
    assert failed_create_blockers([sts], [_event("u2", "denied", "t")])[0].message.startswith(
        "StatefulSet s"
    )


def test_unschedulable_pods_and_image_pull_errors() -> None:
    pods = [
        {
            "metadata": {"name": "p0"},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": '0/4 nodes are available: persistentvolumeclaim "x" not found.',
                    }
                ]
            },
        },
        {
            "metadata": {"name": "p1"},
            "status": {
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "image": "registry.invalid/missing:1",
                        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}},
                    }
                ]
            },
        },
        {"metadata": {"name": "p2", "deletionTimestamp": "t"}, "status": {"conditions": []}},
        {"metadata": {"name": "p3"}, "status": {"containerStatuses": [{"state": {"running": {}}}]}},
    ]
    unschedulable, pull = pod_blockers(pods)
    assert unschedulable.reason == "PodUnschedulable"
    assert 'persistentvolumeclaim "x" not found' in unschedulable.message
    assert pull.reason == "ImagePullFailed"
    assert "registry.invalid/missing:1" in pull.message
    assert "ImagePullBackOff" in pull.message


def test_a_child_that_kueue_queued_is_a_blocker_naming_the_fix() -> None:
    from distgnn_operator.status.blockers import kueue_blockers

    job = {
        "kind": "Job",
        "metadata": {"name": "demo-partition", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
    }
    mine = {"kind": "StatefulSet", "metadata": {"name": "demo-trainer", "labels": {"team": "a"}}}
    (found,) = kueue_blockers([job, mine, {"kind": "Pod", "metadata": {}}])
    assert found.reason == "KueueManagesChild"
    assert "Job demo-partition has label kueue.x-k8s.io/queue-name=default" in found.message
    assert "DistGNNJob.v1alpha1.distgnn.io" in found.message
    assert "integrations.externalFrameworks" in found.message
