"""An operator restart in the middle of a job continues it: no duplicated children, no lost
status, and what happened while it was down is handled by the new one."""

from __future__ import annotations

import pytest

from tests.integration.child_kinds import CHILD_KINDS
from tests.integration.served_job import training_job
from tests.operator.harness import Cluster, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def inventory(cluster: Cluster, job: str) -> dict[str, list[str]]:
    return {
        k.kind: sorted(o["metadata"]["uid"] for o in cluster.owned(k, job)) for k in CHILD_KINDS
    }


def test_operator_restart_mid_job(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    spec = {"runPolicy": {"backoffLimit": 2}}
    with training_job(control_plane, namespace, "durable", **spec) as (cluster, trainers):
        cluster.running_pods("durable", "sampler", 2)
        cluster.exit_pods(trainers[:1], 1)
        wait_for("a gang restart", lambda: cluster.status("durable").get("restarts") == 1)
        cluster.running_pods("durable", "trainer", 2)
    before_status = cluster.status("durable")
    before = inventory(cluster, "durable")
    assert {kind: len(uids) for kind, uids in before.items()} == {
        "ConfigMap": 1,
        "PersistentVolumeClaim": 1,
        "Job": 1,
        "Service": 1,
        "NetworkPolicy": 1,
        "StatefulSet": 2,
    }

    # While no operator runs, a trainer fails.
    trainers = cluster.running_pods("durable", "trainer", 2)
    cluster.exit_pods(trainers[1:], 1)

    with run_operator(control_plane, namespace):
        wait_for(
            "the missed failure handled", lambda: cluster.status("durable").get("restarts") == 2
        )
        trainers = cluster.running_pods("durable", "trainer", 2)
        assert inventory(cluster, "durable") == before
        status = cluster.status("durable")
        assert status["startTime"] == before_status["startTime"]
        assert status["partition"] == before_status["partition"]
        partitioned = next(c for c in status["conditions"] if c["type"] == "Partitioned")
        old = next(c for c in before_status["conditions"] if c["type"] == "Partitioned")
        assert partitioned == old
        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("durable", "Succeeded")
    assert inventory(cluster, "durable") == before
    assert cluster.status("durable")["restarts"] == 2
