"""activeDeadlineSeconds: a job active longer than its deadline fails and is scaled down."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import STATEFULSET
from tests.integration.served_job import training_job
from tests.operator.harness import wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_active_deadline(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    deadline = {"activeDeadlineSeconds": 8}
    with training_job(control_plane, namespace, "late", runPolicy=deadline) as (cluster, _):
        status = cluster.wait_phase("late", "Failed", timeout=60)
        wait_for(
            "the trainer StatefulSet at 0",
            lambda: (cluster.get(STATEFULSET, "late-trainer") or {})["spec"]["replicas"] == 0,
        )
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds (8s)" in failed["message"]
    assert "DeadlineExceeded" in cluster.event_reasons("late")
