"""Worker mode (samplers.replicas 0): no sampler StatefulSet; trainers hold the partitions."""

from __future__ import annotations

import pytest

from distgnn_api import contract
from distgnn_operator.reconcile.kube_api import STATEFULSET
from tests.operator.harness import (
    Cluster,
    env_of,
    job_manifest,
    run_operator,
    wait_for,
)
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_worker_mode(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("workers")
    manifest = job_manifest(
        "workers",
        samplers={"replicas": 0},
        trainers={"replicas": 3, "gpusPerPod": 1},
        partition={"numPartitions": 6},
    )
    with run_operator(control_plane, namespace):
        cluster.apply(manifest)
        status = cluster.wait_phase("workers", "Training")
        assert status["partition"]["numPartitions"] == 6
        trainers = cluster.running_pods("workers", "trainer", 3)
        assert cluster.get(STATEFULSET, "workers-sampler") is None
        assert cluster.pods("workers", "sampler") == []
        env = env_of(cluster.get(STATEFULSET, "workers-trainer") or {})
        assert env[contract.ENV_NUM_SAMPLERS] == "0"
        # Set, and empty (the API server drops an empty value).
        assert contract.ENV_SAMPLER_ADDRS in env
        assert not env[contract.ENV_SAMPLER_ADDRS]
        assert env[contract.ENV_NUM_TRAINERS] == "3"
        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("workers", "Succeeded")
        wait_for(
            "the trainer StatefulSet at 0",
            lambda: (cluster.get(STATEFULSET, "workers-trainer") or {})["spec"]["replicas"] == 0,
        )
    assert cluster.get(STATEFULSET, "workers-sampler") is None
