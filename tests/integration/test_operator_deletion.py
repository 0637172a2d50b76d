"""Deleting a job removes its children through garbage collection (ownerReferences); the
claim follows its retention policy."""

from __future__ import annotations

import pytest

from distgnn_operator.reconcile.kube_api import PVC, Kind
from tests.integration.child_kinds import OWNED_KINDS
from tests.integration.served_job import training_job
from tests.operator.harness import Cluster, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def remaining(cluster: Cluster, job: str, kinds: tuple[Kind, ...]) -> list[str]:
    return [f"{k.kind}/{o['metadata']['name']}" for k in kinds for o in cluster.owned(k, job)]


@pytest.mark.parametrize(("retention", "claim_kept"), [("Retain", True), ("Delete", False)])
def test_deletion_cascades(
    control_plane: ControlPlane, namespace: str, crd: None, retention: str, claim_kept: bool
) -> None:
    name = f"doomed-{retention.lower()}"
    storage = {"storageClassName": "distgnn-test", "size": "10Gi", "retentionPolicy": retention}
    with training_job(control_plane, namespace, name, storage=storage) as (cluster, _):
        owned = OWNED_KINDS
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
