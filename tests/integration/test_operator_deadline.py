"""activeDeadlineSeconds: a job active longer than its deadline fails and is scaled down."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import STATEFULSET
from tests.operator.harness import Cluster, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_active_deadline(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("late")
    with run_operator(control_plane, namespace):
        cluster.apply(job_manifest("late", runPolicy={"activeDeadlineSeconds": 8}))
        cluster.wait_phase("late", "Training")
        cluster.running_pods("late", "trainer", 2)
        status = cluster.wait_phase("late", "Failed", timeout=60)
        wait_for(
            "the trainer StatefulSet at 0",
            lambda: (cluster.get(STATEFULSET, "late-trainer") or {})["spec"]["replicas"] == 0,
        )
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds (8s)" in failed["message"]
    assert "DeadlineExceeded" in cluster.event_reasons("late")
