"""Failure policy against the real control plane: a trainer failure gang-restarts every pod
(new pods, new restart generation); past backoffLimit the job is Failed and scaled down. A
failed partition Job fails the job with the Job's own reason."""

from __future__ import annotations

import json

import pytest

from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET
from tests.integration.served_job import served_job, training_job
from tests.operator.harness import job_manifest, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def uids(pods: list[dict[str, object]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}  # type: ignore[index]


def test_gang_restart_then_backoff_limit(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    backoff = {"backoffLimit": 1}
    with training_job(control_plane, namespace, "flaky", runPolicy=backoff) as (cluster, trainers):
        samplers = cluster.running_pods("flaky", "sampler", 2)
        before = uids(trainers) | uids(samplers)

        cluster.exit_pods(trainers[1:], 1)
        wait_for("the first gang restart", lambda: cluster.status("flaky").get("restarts") == 1)
        assert cluster.phase("flaky") == "Training"

        # The Training condition moves on once the new gang is up; the GangRestart event keeps
        # the cause. The event is posted after the status write that counts the restart.
        def restart_messages() -> list[str]:
            events = cluster.events("flaky")
            return [e["message"] for e in events if e["reason"] == "GangRestart"]

        wait_for("the GangRestart event", lambda: bool(restart_messages()))
        restarts = restart_messages()
        assert any("flaky-trainer-1" in m and "exited with code 1" in m for m in restarts), restarts
        # Every pod of both roles is replaced, and the new ones carry the new generation.
        new_trainers = cluster.running_pods("flaky", "trainer", 2)
        new_samplers = cluster.running_pods("flaky", "sampler", 2)
        assert not (uids(new_trainers) | uids(new_samplers)) & before
        for pod in new_trainers + new_samplers:
            assert pod["metadata"]["labels"]["distgnn.io/restart-generation"] == "1"

        cluster.exit_pods(new_samplers[:1], 3)
        status = cluster.wait_phase("flaky", "Failed")
        cluster.wait_replicas("flaky-sampler", 0)
        cluster.wait_replicas("flaky-trainer", 0)
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "flaky-sampler-0" in failed["message"]
    assert "backoffLimit is 1" in failed["message"]
    assert status["restarts"] == 1
    warnings = {e["reason"] for e in cluster.events("flaky") if e["type"] == "Warning"}
    assert {"GangRestart", "BackoffLimitExceeded"} <= warnings


def test_bad_input_fails_without_restarting(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    spec = {"runPolicy": {"backoffLimit": 5}}
    with training_job(control_plane, namespace, "badinput", **spec) as (cluster, trainers):
        cluster.exit_pods(trainers[:1], 2)
        status = cluster.wait_phase("badinput", "Failed")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BadInput"
    assert status["restarts"] == 0


def test_partition_job_failure_fails_with_its_reason(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    # No node matches the selector, so the partition pod never runs; a deadline on the Job
    # then makes the Job controller fail it (reason DeadlineExceeded).
    manifest = job_manifest("nopart", scheduling={"nodeSelector": {"pool": "nowhere"}})
    with served_job(control_plane, namespace, manifest) as cluster:
        wait_for("the partition Job", lambda: cluster.get(JOB, "nopart-partition"))
        control_plane.kubectl(
            "patch",
            "job",
            "nopart-partition",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"activeDeadlineSeconds": 1}}),
        )
        status = cluster.wait_phase("nopart", "Failed")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "partition Job nopart-partition failed" in failed["message"]
    partitioned = next(c for c in status["conditions"] if c["type"] == "Partitioned")
    assert (partitioned["status"], partitioned["reason"]) == ("False", "PartitionJobFailed")
    assert cluster.get(STATEFULSET, "nopart-trainer") is None
