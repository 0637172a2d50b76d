"""Kueue's quota cannot be bypassed through a job's children, and every error on the Kueue
path reaches the job: the real Kueue controller manager (tests/support/kueue.py) runs with its
batch/Job integration and its Job webhooks on, as a cluster that runs other Jobs has it, and
with DistGNNJob among its external frameworks (README: Kueue); the operator runs in process.

The namespace also holds a LocalQueue named ``default``: Kueue's webhook gives it to every Job
that names no queue and has no owner Kueue manages (LocalQueueDefaulting), so a partition Job
that Kueue took for a standalone Job would be queued and suspended on its own."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distgnn_operator import naming
from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET, WORKLOAD
from tests.operator.harness import Cluster, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.kueue_queues import Queues, queued, workload_of

pytestmark = pytest.mark.integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def _kueue_keys(obj: dict[str, Any]) -> list[str]:
    meta = obj.get("metadata") or {}
    keys = [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]
    return [k for k in keys if "kueue.x-k8s.io/" in k]


def _finish(cluster: Cluster, job: str) -> None:
    cluster.exit_pods(cluster.running_pods(job, "trainer", 2), 0)
    cluster.wait_phase(job, "Succeeded")


@pytest.mark.parametrize("field", ["labels", "annotations"])
def test_kueue_keys_on_scheduling_are_refused_at_admission(
    control_plane: ControlPlane, namespace: str, queues: Queues, field: str
) -> None:
    manifest = job_manifest("leaky", scheduling={field: {QUEUE_LABEL: "user"}})
    done = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False
    )
    assert done.returncode != 0
    assert f"spec.scheduling.{field}" in done.stderr, done.stderr
    assert "belong on the DistGNNJob's own metadata.labels" in done.stderr
    assert Cluster(control_plane, namespace).job("leaky") is None


def test_the_batch_job_integration_leaves_the_children_to_the_jobs_workload(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"gpu": ({}, 2)})
    queues.local_queue("default")
    cluster = Cluster(control_plane, namespace)
    # The trap is live: a Job that no managed object owns gets the default queue, suspended.
    cluster.apply(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "standalone"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "registry.invalid/c:1"}],
                    }
                }
            },
        }
    )
    standalone = cluster.get(JOB, "standalone")
    assert standalone is not None
    assert standalone["metadata"]["labels"][QUEUE_LABEL] == "default"
    assert standalone["spec"]["suspend"] is True
    control_plane.kubectl("delete", "job", "standalone", "-n", namespace, "--wait=false")

    for job in ("queued", "plain"):
        cluster.volume_for_created_claim(job)
    with run_operator(control_plane, namespace):
        cluster.apply(queued("queued"))
        cluster.apply(job_manifest("plain"))
        for job in ("queued", "plain"):
            cluster.wait_phase(job, "Training", timeout=90)
            cluster.running_pods(job, "trainer", 2)
        for job in ("queued", "plain"):
            partition = cluster.get(JOB, naming.partition_job_name(job))
            assert partition is not None
            assert _kueue_keys(partition) == [], partition["metadata"]
            assert not partition["spec"].get("suspend")
            for role in ("sampler", "trainer"):
                sts = cluster.get(STATEFULSET, f"{job}-{role}")
                assert sts is not None
                assert _kueue_keys(sts) == []
            assert all(_kueue_keys(p) == [] for p in cluster.pods(job))
            blocked = cluster.condition(job, "Blocked") or {}
            assert blocked.get("reason") != "KueueManagesChild", blocked
        # The queued job's Workload, and none of a partition Job (the standalone Job's may
        # still be going away).
        items = control_plane.get_json("workloads.kueue.x-k8s.io", "-n", namespace)["items"]
        owners = [(r["kind"], r["name"]) for w in items for r in w["metadata"]["ownerReferences"]]
        assert [o for o in owners if o != ("Job", "standalone")] == [("DistGNNJob", "queued")]
        for job in ("queued", "plain"):
            _finish(cluster, job)
        for job in ("queued", "plain"):
            partition = cluster.get(JOB, naming.partition_job_name(job))
            assert partition is not None
            assert _kueue_keys(partition) == []


def test_a_missing_priority_class_is_a_condition_and_a_warning_until_it_exists(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"gpu": ({}, 2)})
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("prio")
    missing = queues.name("nosuchprio")
    job = queued("prio")
    job["metadata"]["labels"][PRIORITY_LABEL] = missing
    with run_operator(control_plane, namespace):
        cluster.apply(job)
        blocked = wait_for("the Blocked condition", lambda: cluster.condition("prio", "Blocked"))
        assert (blocked["status"], blocked["reason"]) == ("True", "KueueError")
        assert f"WorkloadPriorityClass {missing!r}" in blocked["message"]
        assert "does not exist" in blocked["message"]
        assert cluster.phase("prio") == "Queued"
        waiting = cluster.condition("prio", "Queued")
        assert waiting is not None
        assert (waiting["status"], waiting["reason"]) == ("True", "KueueError")
        warnings = wait_for(
            "the Warning event",
            lambda: [e for e in cluster.events("prio") if e["reason"] == "KueueError"],
        )
        assert {e["type"] for e in warnings} == {"Warning"}
        assert missing in warnings[0]["message"]
        assert cluster.pods("prio") == []
        assert workload_of(cluster, "prio") is None

        # Fixed: the class appears; a later reconcile creates the Workload and Kueue admits it.
        assert queues.priority_class("nosuchprio", 100) == missing
        cluster.wait_phase("prio", "Training", timeout=90)
        workload = workload_of(cluster, "prio")
        assert workload is not None
        assert workload["spec"]["priority"] == 100
        cleared = cluster.condition("prio", "Blocked")
        assert cleared is not None
        assert (cleared["status"], cleared["reason"]) == ("False", "Unblocked")
        assert cluster.get(WORKLOAD, workload["metadata"]["name"]) is not None
        _finish(cluster, "prio")
