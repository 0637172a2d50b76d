"""ttlSecondsAfterFinished: a finished job is deleted, and its children follow."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import CONFIG_MAP, JOB, STATEFULSET
from tests.integration.served_job import training_job
from tests.operator.harness import wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_ttl_after_finished(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    ttl = {"ttlSecondsAfterFinished": 3}
    with training_job(control_plane, namespace, "brief", runPolicy=ttl) as (cluster, trainers):
        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("brief", "Succeeded")
        assert cluster.job("brief") is not None
        wait_for("the job to be deleted", lambda: cluster.job("brief") is None, timeout=60)
        # Garbage collection removes what the job owned.
        wait_for(
            "the children to be collected",
            lambda: all(
                cluster.get(kind, name) is None
                for kind, name in (
                    (STATEFULSET, "brief-trainer"),
                    (STATEFULSET, "brief-sampler"),
                    (JOB, "brief-partition"),
                    (CONFIG_MAP, "brief-config"),
                )
            ),
        )
    ttl_events = [e for e in cluster.events("brief") if e["reason"] == "TTLExpired"]
    assert len(ttl_events) == 1
    assert "3s" in ttl_events[0]["message"]
