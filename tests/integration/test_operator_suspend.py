"""Suspend and resume: created suspended (as Kueue does), resumed, suspended mid-training (pods
removed, StatefulSets at 0), resumed again (pods back)."""

from __future__ import annotations

import json

import pytest

from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET
from tests.integration.served_job import served_job
from tests.operator.harness import Cluster, job_manifest, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def set_suspend(plane: ControlPlane, namespace: str, name: str, suspend: bool) -> None:
    patch = json.dumps({"spec": {"runPolicy": {"suspend": suspend}}})
    plane.kubectl("patch", "dgj", name, "-n", namespace, "--type=merge", "-p", patch)


def replicas(cluster: Cluster, role: str) -> int | None:
    sts = cluster.get(STATEFULSET, f"paused-{role}")
    return None if sts is None else int(sts["spec"]["replicas"])


def test_suspend_and_resume(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    manifest = job_manifest("paused", runPolicy={"suspend": True})
    with served_job(control_plane, namespace, manifest) as cluster:
        status = cluster.wait_phase("paused", "Suspended")
        assert "startTime" not in status
        cond = cluster.condition("paused", "Suspended")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("True", "JobSuspended")
        # Nothing runs while suspended from the start.
        assert cluster.get(JOB, "paused-partition") is None
        assert cluster.get(STATEFULSET, "paused-trainer") is None

        set_suspend(control_plane, namespace, "paused", False)
        cluster.wait_phase("paused", "Training")
        cluster.running_pods("paused", "trainer", 2)
        cond = cluster.condition("paused", "Suspended")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "JobResumed")
        started = cluster.status("paused")["startTime"]

        set_suspend(control_plane, namespace, "paused", True)
        cluster.wait_phase("paused", "Suspended")
        wait_for(
            "both StatefulSets at 0",
            lambda: replicas(cluster, "sampler") == 0 and replicas(cluster, "trainer") == 0,
        )
        wait_for(
            "the sampler and trainer pods to go",
            lambda: not cluster.pods("paused", "trainer") and not cluster.pods("paused", "sampler"),
        )
        training = cluster.condition("paused", "Training")
        assert training is not None
        assert training["status"] == "False"

        set_suspend(control_plane, namespace, "paused", False)
        cluster.wait_phase("paused", "Training")
        trainers = cluster.running_pods("paused", "trainer", 2)
        cluster.running_pods("paused", "sampler", 2)
        assert replicas(cluster, "trainer") == 2
        assert cluster.status("paused")["startTime"] >= started
        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("paused", "Succeeded")
    reasons = cluster.event_reasons("paused")
    assert {"JobSuspended", "JobResumed", "TrainersSucceeded"} <= reasons


def test_suspend_while_partitioning_suspends_the_job(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    # No node matches: the partition pod stays Pending, so the job stays Partitioning.
    manifest = job_manifest("slow", scheduling={"nodeSelector": {"pool": "nowhere"}})
    with served_job(control_plane, namespace, manifest) as cluster:
        cluster.wait_phase("slow", "Partitioning")
        set_suspend(control_plane, namespace, "slow", True)
        cluster.wait_phase("slow", "Suspended")
        wait_for(
            "the partition Job suspended",
            lambda: (cluster.get(JOB, "slow-partition") or {})["spec"].get("suspend") is True,
        )
        set_suspend(control_plane, namespace, "slow", False)
        cluster.wait_phase("slow", "Partitioning")
        wait_for(
            "the partition Job resumed",
            lambda: (cluster.get(JOB, "slow-partition") or {})["spec"].get("suspend") is False,
        )
