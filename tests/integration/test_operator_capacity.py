"""A job whose resources cannot hold its capacity plan, on the real control plane: the
operator sets CapacityFits=False and posts a Warning Event naming the role, the resource and
the shortfall; with the capacity policy fail it fails the job before any child starts. A job
whose graph, sized by its spec, cannot hold it fails before its partition Job, whatever the
policy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from distgnn_operator.reconcile.kube_api import JOB
from tests.operator.harness import Cluster, install_crd, job_manifest, run_operator, wait_for
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

REASON = "InsufficientCapacity"
# CPU trainers limited to 256Mi: a workload process alone needs more (distgnn plan).
SHORT: dict[str, Any] = {"trainers": {"replicas": 2, "gpusPerPod": 0,
                                      "resources": {"limits": {"memory": "256Mi"}}}}  # fmt: skip


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    install_crd(control_plane)


@pytest.fixture
def cluster(control_plane: ControlPlane, crd: None) -> Iterator[Cluster]:
    namespace = control_plane.create_namespace("capacity")
    try:
        yield Cluster(control_plane, namespace)
    finally:
        control_plane.delete_namespace(namespace)


def capacity_warnings(cluster: Cluster, name: str) -> list[str]:
    return [
        e["message"]
        for e in cluster.events(name)
        if e["type"] == "Warning" and e["reason"] == REASON
    ]


@contextmanager
def operator_with_policy(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, policy: str
) -> Iterator[None]:
    """The in-process operator with DISTGNN_OPERATOR_CAPACITY_POLICY set to ``policy``."""
    monkeypatch.setenv("DISTGNN_OPERATOR_CAPACITY_POLICY", policy)
    with run_operator(cluster.plane, cluster.ns):
        yield


def test_warn_flags_the_job_and_lets_it_go_on(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    with operator_with_policy(cluster, monkeypatch, "warn"):
        cluster.apply(job_manifest("short", **SHORT))
        cluster.apply(job_manifest("fits", trainers={"replicas": 2, "gpusPerPod": 0}))

        def short_flagged() -> dict[str, Any] | None:
            cond = cluster.condition("short", "CapacityFits")
            return cond if cond is not None and cond["status"] == "False" else None

        cond = wait_for("CapacityFits=False on short", short_flagged)
        assert cond["reason"] == REASON
        assert "trainer: needs" in cond["message"]
        assert "spec.trainers.resources.limits.memory" in cond["message"]
        messages = wait_for("the Warning Event", lambda: capacity_warnings(cluster, "short"))
        assert "short by" in messages[0]
        # warn only: the job goes on to its partition Job
        wait_for("the partition Job", lambda: cluster.owned(JOB, "short"))
        assert cluster.phase("short") != "Failed"
        wait_for("the other job's partition Job", lambda: cluster.owned(JOB, "fits"))
        assert cluster.condition("fits", "CapacityFits") is None
        assert not capacity_warnings(cluster, "fits")


def test_fail_fails_the_job_before_any_child(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    with operator_with_policy(cluster, monkeypatch, "fail"):
        cluster.apply(job_manifest("short", **SHORT))
        status = cluster.wait_phase("short", "Failed")
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == REASON
        assert "trainer: needs" in failed["message"]
        assert wait_for("the Warning Event", lambda: capacity_warnings(cluster, "short"))
        assert cluster.owned(JOB, "short") == []


def test_a_graph_too_small_for_the_job_fails_it_before_the_partition_job(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = {"synthetic": {"numNodes": 8, "numEdges": 20}}
    with operator_with_policy(cluster, monkeypatch, "off"):
        cluster.apply(job_manifest("tiny", dataset=tiny, samplers={"replicas": 16}))
        status = cluster.wait_phase("tiny", "Failed")
        failed = next(c for c in status["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "SpecDoesNotFitGraph"
        assert failed["message"].startswith(
            "spec.samplers.replicas: 16 partitions exceed the graph's 8 nodes"
        )
        warnings = wait_for(
            "the Warning Event",
            lambda: [e for e in cluster.events("tiny") if e["reason"] == "SpecDoesNotFitGraph"],
        )
        assert warnings[0]["type"] == "Warning"
        assert cluster.owned(JOB, "tiny") == []
