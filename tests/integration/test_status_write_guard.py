"""The status write against the real API server: it goes through whatever kopf patched in
the job's metadata meanwhile, and conflicts when the status itself changed since it was read
(a stale status never overwrites a newer one), whether the test of the status compares it
exactly or a value that Python and Go write differently makes it fall back to the job's
resourceVersion."""

from __future__ import annotations

from typing import Any

import pytest

from distgnn_operator.reconcile.kube_api import DISTGNNJOB, ApiError, RestKubeApi, comparable
from tests.operator.harness import job_manifest
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def _status(phase: str, message: str = "waiting", loss: float = 0.25) -> dict[str, Any]:
    return {
        "phase": phase,
        "conditions": [
            {
                "type": "Partitioned",
                "status": "False",
                "reason": "PartitionJobRunning",
                "message": message,
                "lastTransitionTime": "2026-11-27T00:00:00Z",
            }
        ],
        "progress": {"epoch": 1, "seedsPerSecond": 1234.5, "loss": loss},
        "restarts": 0,
        "completionTime": None,
    }


@pytest.mark.parametrize(
    ("message", "loss", "exact"),
    [("waiting", 0.25, True), ("waiting for <b> & é", 1.5e-05, False)],
    ids=["compared-exactly", "resource-version"],
)
def test_status_write_guard(
    control_plane: ControlPlane, namespace: str, crd: None, message: str, loss: float, exact: bool
) -> None:
    api = RestKubeApi(control_plane.api_client())
    created = api.create(
        {**job_manifest("guarded"), "metadata": {"name": "guarded", "namespace": namespace}}
    )
    assert created.get("status") is None
    first = api.replace_status(created, _status("Pending", message, loss))
    assert first["status"]["phase"] == "Pending"
    assert "completionTime" not in first["status"]  # nulls are pruned
    assert comparable(first["status"]) is exact

    # kopf adds its finalizer and an annotation: the job's version moves, its status does not.
    api.patch(
        DISTGNNJOB,
        namespace,
        "guarded",
        {"metadata": {"finalizers": ["distgnn.io/test"], "annotations": {"kopf": "handled"}}},
    )
    if exact:
        second = api.replace_status(first, _status("Partitioning", message, loss))
        assert second["status"]["phase"] == "Partitioning"
        assert second["metadata"]["finalizers"] == ["distgnn.io/test"]
    else:
        with pytest.raises(ApiError) as moved:
            api.replace_status(first, _status("Partitioning", message, loss))
        assert moved.value.conflict
        second = api.replace_status(
            api.get(DISTGNNJOB, namespace, "guarded") or {},
            _status("Partitioning", message, loss),
        )
        assert second["status"]["phase"] == "Partitioning"

    # A write from a stale read of the status conflicts and changes nothing.
    with pytest.raises(ApiError) as stale:
        api.replace_status(first, _status("Failed", message, loss))
    assert stale.value.conflict
    assert (api.get(DISTGNNJOB, namespace, "guarded") or {})["status"]["phase"] == "Partitioning"
    # A status the schema rejects is refused as such, not taken for a stale read.
    with pytest.raises(ApiError) as invalid:
        api.replace_status(second, _status("Bogus", message, loss))
    assert (invalid.value.status, invalid.value.conflict) == (422, False)
    api.patch(DISTGNNJOB, namespace, "guarded", {"metadata": {"finalizers": None}})
