"""A second job on the same claim with the same dataset and partition spec skips the partition
Job: the first recorded the complete partition on the claim."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import JOB, PVC, STATEFULSET
from tests.operator.harness import Cluster, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_second_job_reuses_the_partition(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.create_bound_claim("shared")
    storage = {"claimName": "shared"}
    with run_operator(control_plane, namespace):
        cluster.apply(job_manifest("first", storage=storage))
        first = cluster.wait_phase("first", "Training")
        assert first["partition"]["reused"] is False
        assert cluster.get(JOB, "first-partition") is not None
        key = first["partition"]["key"]
        wait_for(
            "the partition marker on the claim",
            lambda: (
                (cluster.get(PVC, "shared") or {})["metadata"]
                .get("annotations", {})
                .get(f"partitions.distgnn.io/{key}")
                == "complete"
            ),
        )

        # Same dataset and partition spec, different training: same key, nothing to partition.
        cluster.apply(job_manifest("second", storage=storage, training={"epochs": 3}))
        second = cluster.wait_phase("second", "Training")
        assert second["partition"]["key"] == key
        assert second["partition"]["reused"] is True
        reason = cluster.condition("second", "Partitioned")
        assert reason is not None
        assert (reason["status"], reason["reason"]) == ("True", "PartitionReused")
        assert "shared" in reason["message"]
        wait_for("the second job's trainers", lambda: cluster.get(STATEFULSET, "second-trainer"))
        assert cluster.get(JOB, "second-partition") is None

        # A different partition spec is a different key: it partitions again.
        cluster.apply(job_manifest("third", storage=storage, partition={"algorithm": "random"}))
        wait_for("the third job's partition Job", lambda: cluster.get(JOB, "third-partition"))
        third = cluster.wait_phase("third", "Training")
        assert third["partition"]["key"] != key
        assert third["partition"]["reused"] is False
    assert cluster.get(JOB, "second-partition") is None
