"""Kueue queues, admits, places and preempts DistGNNJobs: the real Kueue controller manager
(tests/support/kueue.py) runs against the test control plane, and the operator runs in process.

Each test makes its own ResourceFlavors, ClusterQueue and LocalQueue (cluster-scoped names
carry a random suffix), with a quota on nvidia.com/gpu: a default job asks for 2 trainers of
1 GPU each."""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_operator.reconcile.kube_api import PVC, STATEFULSET, WORKLOAD
from tests.integration.served_job import kueue_operator_account, served_job
from tests.operator.harness import Cluster, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.kueue_queues import (
    GPU,
    POOL_LABEL,
    Queues,
    queued,
    workload_condition,
    workload_of,
)

pytestmark = pytest.mark.integration


def finish(cluster: Cluster, job: str) -> None:
    cluster.exit_pods(cluster.running_pods(job, "trainer", 2), 0)
    cluster.wait_phase(job, "Succeeded")


def test_quota_for_one_job_queues_the_second_until_the_first_finishes(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"gpu": ({}, 2)})
    cluster = Cluster(control_plane, namespace)
    for job in ("first", "second"):
        cluster.volume_for_created_claim(job)
    # The operator runs with exactly the chart's rules for kueue.enabled (distgnn_operator.rbac).
    with kueue_operator_account(control_plane, namespace) as account:
        token = control_plane.token_kubeconfig(namespace, account)
        with run_operator(control_plane, namespace, kubeconfig=token) as runner:
            _queue_two_jobs(control_plane, namespace, cluster, queues)
    assert "Forbidden" not in runner.output
    assert 'HTTP/1.1" 403' not in runner.output


def _queue_two_jobs(
    control_plane: ControlPlane, namespace: str, cluster: Cluster, queues: Queues
) -> None:
    cluster.apply(queued("first"))
    cluster.wait_phase("first", "Training")
    cluster.running_pods("first", "trainer", 2)
    wl = workload_of(cluster, "first")
    assert wl is not None
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("partition", 1), ("sampler", 2), ("trainer", 2),
    ]  # fmt: skip
    assert cluster.status("first")["kueue"]["clusterQueue"] == queues.cluster_queue

    cluster.apply(queued("second"))
    status = cluster.wait_phase("second", "Queued")
    wait_for(
        "Kueue's reason on the second job",
        lambda: "insufficient" in (cluster.condition("second", "Queued") or {}).get("message", ""),
    )  # fmt: skip
    cond = cluster.condition("second", "Queued")
    assert cond is not None
    assert cond["status"] == "True"
    assert status["kueue"]["admitted"] is False
    assert cluster.pods("second") == []
    assert cluster.get(STATEFULSET, "second-trainer") is None
    table = control_plane.kubectl("get", "dgj", "-n", namespace, "-o", "wide").stdout
    (row,) = [line.split() for line in table.splitlines() if line.startswith("second ")]
    assert row[1] == "Queued"
    assert cond["reason"] in row  # -o wide: Kueue's reason column

    finish(cluster, "first")
    wait_for("the first Workload Finished", lambda: (workload_condition(cluster, "first", "Finished") or {}).get("status") == "True")  # fmt: skip
    cluster.wait_phase("second", "Training", timeout=90)
    cluster.running_pods("second", "trainer", 2)
    admitted = cluster.condition("second", "Queued")
    assert admitted is not None
    assert (admitted["status"], admitted["reason"]) == (
        "False",
        "Admitted",
    )


def _volume(plane: ControlPlane, namespace: str, job: str) -> Path:
    return plane.workdir / "volumes" / f"{namespace}-{job}-data"


def test_higher_priority_preempts_and_the_victim_resumes_from_its_checkpoint(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"gpu": ({}, 2)}, preemption={"withinClusterQueue": "LowerPriority"})
    low = queues.priority_class("low", 10)
    high = queues.priority_class("high", 1000)
    cluster = Cluster(control_plane, namespace)
    for job in ("victim", "urgent"):
        cluster.volume_for_created_claim(job)
    victim = queued("victim")
    victim["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = low
    urgent = queued("urgent")
    urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = high
    with run_operator(control_plane, namespace):
        cluster.apply(victim)
        cluster.wait_phase("victim", "Training")
        cluster.running_pods("victim", "trainer", 2)
        uid = cluster.job("victim")["metadata"]["uid"]  # type: ignore[index]
        # Play trainer 0: an epoch's checkpoint on the volume.
        checkpoints = _volume(control_plane, namespace, "victim") / "runs" / uid / "checkpoints"
        checkpoints.mkdir(parents=True)
        (checkpoints / "latest.json").write_text('{"epoch": 3, "path": "epoch-3.pt"}')
        (checkpoints / "epoch-3.pt").write_bytes(b"weights")
        wl = workload_of(cluster, "victim")
        assert wl is not None
        assert wl["spec"]["priority"] == 10

        cluster.apply(urgent)
        cluster.wait_phase("victim", "Queued", timeout=90)
        wait_for("the victim's pods gone", lambda: not cluster.pods("victim", "trainer") and not cluster.pods("victim", "sampler"))  # fmt: skip
        cond = cluster.condition("victim", "Queued")
        assert cond is not None
        assert cond["reason"] == "Preempted", cond
        assert cluster.status("victim")["kueue"]["reason"] == "Preempted"
        # Its pods gone, the operator handed the quota back and Kueue requeued the Workload.
        wait_for(
            "the victim's quota released",
            lambda: (
                (workload_condition(cluster, "victim", "QuotaReserved") or {}).get("status")
                == "False"
            ),
        )
        requeued = workload_condition(cluster, "victim", "Requeued")
        assert requeued is not None
        assert (requeued["status"], requeued["reason"]) == ("True", "Preempted")
        assert "Preempted" in cluster.event_reasons("victim")
        cluster.wait_phase("urgent", "Training", timeout=90)
        cluster.running_pods("urgent", "trainer", 2)
        # The partition and the checkpoints stay.
        claim = cluster.get(PVC, "victim-data")
        assert claim is not None
        assert claim["metadata"].get("deletionTimestamp") is None
        assert any(k.startswith("partitions.distgnn.io/") for k in claim["metadata"]["annotations"])
        assert (checkpoints / "latest.json").read_text().startswith('{"epoch": 3')

        finish(cluster, "urgent")
        cluster.wait_phase("victim", "Training", timeout=90)
        trainers = cluster.running_pods("victim", "trainer", 2)
        # Re-admitted, the trainers run the same job (uid) on the same claim: the run
        # directory whose checkpoints/latest.json they resume from.
        for pod in trainers:
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            assert uid in env.values()
            claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]  # fmt: skip
            assert claims == ["victim-data"]
        assert (checkpoints / "epoch-3.pt").read_bytes() == b"weights"
        assert cluster.status("victim").get("restarts", 0) == 0
        finish(cluster, "victim")


def test_a_job_larger_than_any_flavor_stays_queued_with_kueues_reason(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"small": ({}, 2)})
    huge = queued("huge", trainers={"replicas": 4, "gpusPerPod": 1})
    with served_job(control_plane, namespace, huge) as cluster:
        cluster.wait_phase("huge", "Queued")
        wait_for(
            "Kueue's reason in the job's status",
            lambda: "insufficient quota" in cluster.status("huge").get("kueue", {}).get("message", ""),
        )  # fmt: skip
        message = cluster.condition("huge", "Queued")["message"]  # type: ignore[index]
        assert GPU in message
        assert queues.name("small") in message
        assert cluster.phase("huge") == "Queued"
        assert cluster.pods("huge") == []


def test_two_flavors_the_pods_carry_the_chosen_flavors_node_selector(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    pools = {"kwok-gpu-0": "a", "kwok-gpu-1": "b"}
    for node, pool in pools.items():
        control_plane.kubectl("label", "node", node, f"{POOL_LABEL}={pool}", "--overwrite")
    try:
        _place_on_pool_b(control_plane, namespace, queues)
    finally:
        for node in pools:
            control_plane.kubectl("label", "node", node, f"{POOL_LABEL}-", check=False)


def _place_on_pool_b(control_plane: ControlPlane, namespace: str, queues: Queues) -> None:
    # Pool a holds 1 GPU: the job's 2 do not fit, so Kueue assigns pool b.
    toleration = {"key": POOL_LABEL, "operator": "Equal", "value": "b", "effect": "NoSchedule"}
    queues.setup(
        {"pool-a": ({POOL_LABEL: "a"}, 1), "pool-b": ({POOL_LABEL: "b"}, 8)},
        tolerations={"pool-b": [toleration]},
    )
    with served_job(control_plane, namespace, queued("placed")) as cluster:
        cluster.wait_phase("placed", "Training")
        trainers = cluster.running_pods("placed", "trainer", 2)
        for pod in trainers:
            assert pod["spec"]["nodeSelector"][POOL_LABEL] == "b"
            assert pod["spec"]["nodeName"] == "kwok-gpu-1"
            assert toleration in pod["spec"]["tolerations"]
        wl = workload_of(cluster, "placed")
        assert wl is not None
        (trainer,) = [
            a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "trainer"
        ]
        assert trainer["flavors"] == {GPU: queues.name("pool-b")}
        sts = cluster.get(STATEFULSET, "placed-trainer")
        assert sts is not None
        assert sts["spec"]["template"]["spec"]["nodeSelector"] == {POOL_LABEL: "b"}


def test_deleting_a_queued_job_leaves_no_workload(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    queues.setup({"none": ({}, 0)})
    cluster = Cluster(control_plane, namespace)
    with run_operator(control_plane, namespace):
        cluster.apply(queued("doomed"))
        cluster.wait_phase("doomed", "Queued")
        name = wait_for("the Workload", lambda: (workload_of(cluster, "doomed") or {}).get("metadata", {}).get("name"))  # fmt: skip
        control_plane.kubectl(
            "delete", "dgj", "doomed", "-n", namespace, "--wait=true", "--timeout=60s"
        )
        wait_for("the Workload gone", lambda: cluster.get(WORKLOAD, name) is None)
    assert control_plane.get_json("workloads.kueue.x-k8s.io", "-n", namespace)["items"] == []


def test_without_the_label_nothing_changes(
    control_plane: ControlPlane, namespace: str, queues: Queues
) -> None:
    # A ClusterQueue with no quota would hold a queued job forever; this job is not queued.
    queues.setup({"none": ({}, 0)})
    with served_job(control_plane, namespace, job_manifest("plain")) as cluster:
        cluster.wait_phase("plain", "Training")
        trainers = cluster.running_pods("plain", "trainer", 2)
        assert "kueue" not in cluster.status("plain")
        assert cluster.condition("plain", "Queued") is None
        assert control_plane.get_json("workloads.kueue.x-k8s.io", "-n", namespace)["items"] == []
        assert all("nodeSelector" not in p["spec"] for p in trainers)
        finish(cluster, "plain")
