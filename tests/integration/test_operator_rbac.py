"""The operator works with nothing but the RBAC of distgnn_operator.rbac: a ServiceAccount bound
to exactly those rules runs a job through partitioning, training, a gang restart, success and
TTL deletion."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from distgnn_operator.reconcile.kube_api import PVC
from tests.integration.served_job import kueue_operator_account
from tests.operator.harness import Cluster, install_crd, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


@pytest.fixture
def operator_account(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """A ServiceAccount with a Role of NAMESPACED_RULES here and a ClusterRole of CLUSTER_RULES,
    each with Kueue's rules (the chart's kueue.enabled; the in-process operator serves Kueue)."""
    with kueue_operator_account(control_plane, namespace) as sa:
        yield sa


def test_least_privilege(
    control_plane: ControlPlane, namespace: str, operator_account: str
) -> None:
    install_crd(control_plane)
    token = control_plane.token_kubeconfig(namespace, operator_account)
    # The account cannot do more than the rules say.
    denied = control_plane.kubectl("get", "secrets", "-n", namespace, kubeconfig=token, check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower()

    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("scoped")
    manifest = job_manifest("scoped", runPolicy={"ttlSecondsAfterFinished": 1, "backoffLimit": 1})
    with run_operator(control_plane, namespace, kubeconfig=token) as runner:
        cluster.apply(manifest)
        cluster.wait_phase("scoped", "Training")
        trainers = cluster.running_pods("scoped", "trainer", 2)
        cluster.exit_pods(trainers[:1], 1)
        wait_for("a gang restart", lambda: cluster.status("scoped").get("restarts") == 1)
        trainers = cluster.running_pods("scoped", "trainer", 2)
        assert all(
            p["metadata"]["labels"]["distgnn.io/restart-generation"] == "1" for p in trainers
        )
        cluster.exit_pods(trainers, 0)
        wait_for(
            "the job to succeed and be deleted by its TTL", lambda: cluster.job("scoped") is None
        )
    assert "Forbidden" not in runner.output
    assert 'HTTP/1.1" 403' not in runner.output
    claim = cluster.get(PVC, "scoped-data")
    assert claim is not None
    assert any(k.startswith("partitions.distgnn.io/") for k in claim["metadata"]["annotations"])
