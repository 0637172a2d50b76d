"""Deleting a job removes its children through garbage collection (ownerReferences); the
claim follows its retention policy."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    JOB,
    NETWORK_POLICY,
    PVC,
    SERVICE,
    STATEFULSET,
    Kind,
)
from tests.operator.harness import Cluster, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def remaining(cluster: Cluster, job: str, kinds: tuple[Kind, ...]) -> list[str]:
    return [f"{k.kind}/{o['metadata']['name']}" for k in kinds for o in cluster.owned(k, job)]


@pytest.mark.parametrize(("retention", "claim_kept"), [("Retain", True), ("Delete", False)])
def test_deletion_cascades(
    control_plane: ControlPlane, namespace: str, crd: None, retention: str, claim_kept: bool
) -> None:
    cluster = Cluster(control_plane, namespace)
    name = f"doomed-{retention.lower()}"
    cluster.volume_for_created_claim(name)
    storage = {"storageClassName": "distgnn-test", "size": "10Gi", "retentionPolicy": retention}
    with run_operator(control_plane, namespace):
        cluster.apply(job_manifest(name, storage=storage))
        cluster.wait_phase(name, "Training")
        cluster.running_pods(name, "trainer", 2)
        owned = (CONFIG_MAP, JOB, SERVICE, NETWORK_POLICY, STATEFULSET)
        assert len(remaining(cluster, name, owned)) == 6
        control_plane.kubectl(
            "delete", "dgj", name, "-n", namespace, "--wait=true", "--timeout=60s"
        )
        wait_for("the owned children to be collected", lambda: not remaining(cluster, name, owned))
        wait_for(
            "the sampler and trainer pods to go",
            lambda: not cluster.pods(name, "trainer") and not cluster.pods(name, "sampler"),
        )
        if claim_kept:
            claim = cluster.get(PVC, f"{name}-data")
            assert claim is not None
            assert claim["metadata"].get("deletionTimestamp") is None
        else:
            wait_for(
                "the claim to be collected",
                lambda: (
                    cluster.get(PVC, f"{name}-data") or {"metadata": {"deletionTimestamp": "x"}}
                )["metadata"].get("deletionTimestamp"),
            )
