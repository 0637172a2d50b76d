"""Jobs whose children cannot be created or cannot start, on the real control plane: none may
sit in silence. Each is flagged on the job itself (a Blocked condition and a Warning Event that
`kubectl describe dgj` shows) within a bound, and a child the API server refuses fails the job
after the operator's childRejectionLimit.

What only the cluster can know: a claim that does not exist, a claim that cannot bind, an
image that does not pull (kwok plays ErrImagePull for registry.invalid/distgnn/missing:0), a
pod no node fits, a quota the Job controller runs into (FailedCreate), and an admission policy
that refuses the partition Job (422)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.operator.harness import (
    Cluster,
    job_manifest,
    report,
    run_operator,
    wait_for,
)
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

FLAG_BOUND = 90.0
"""Seconds a stuck job may take to be flagged (Blocked or Failed)."""
REJECTION_LIMIT = 3
MISSING_IMAGE = "registry.invalid/distgnn/missing:0"
FLAGGED: dict[str, float] = {}
"""Seconds each job took to be flagged, for the summary."""


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTGNN_OPERATOR_CHILD_REJECTION_LIMIT", str(REJECTION_LIMIT))
    monkeypatch.setenv("DISTGNN_OPERATOR_RETRY_BACKOFF_SECONDS", "0.5")


@pytest.fixture(scope="module")
def served(control_plane: ControlPlane, crd: None) -> Iterator[Cluster]:
    namespace = control_plane.create_namespace("stuck")
    try:
        with run_operator(control_plane, namespace):
            yield Cluster(control_plane, namespace)
    finally:
        control_plane.delete_namespace(namespace)


def flagged(cluster: Cluster, name: str, reason: str, started: float) -> dict[str, Any]:
    """Wait until the job's Blocked (or Failed) condition carries the reason; record the time."""

    def probe() -> dict[str, Any] | None:
        for type_ in ("Failed", "Blocked"):
            cond = cluster.condition(name, type_)
            if cond is not None and cond["status"] == "True" and cond["reason"] == reason:
                return cond
        return None

    cond = wait_for(f"{name} flagged {reason}", probe, timeout=FLAG_BOUND)
    FLAGGED[name] = time.monotonic() - started
    return cond


def described(cluster: Cluster, name: str) -> str:
    return cluster.plane.kubectl("describe", "dgj", name, "-n", cluster.ns).stdout


def warning(cluster: Cluster, name: str, reason: str) -> list[str]:
    return [
        e["message"]
        for e in cluster.events(name)
        if e["type"] == "Warning" and e["reason"] == reason
    ]


@pytest.mark.parametrize(
    ("name", "spec", "reason", "phrase"),
    [
        (
            "no-claim",
            {"storage": {"claimName": "does-not-exist"}},
            "ClaimNotFound",
            "does-not-exist",
        ),
        (
            "no-class",
            {"storage": {"storageClassName": "no-such-class"}},
            "PodUnschedulable",
            "unbound",
        ),
        ("no-image", {"images": {"cpu": MISSING_IMAGE}}, "ImagePullFailed", MISSING_IMAGE),
        (
            "no-node",
            {"scheduling": {"nodeSelector": {"example.com/no-such-node": "true"}}},
            "PodUnschedulable",
            "node",
        ),
    ],
)
def test_a_child_that_cannot_start_is_flagged(
    served: Cluster, name: str, spec: dict[str, Any], reason: str, phrase: str
) -> None:
    cluster = served
    manifest = job_manifest(name, **spec)
    if "claimName" in spec.get("storage", {}):
        manifest["spec"]["storage"].pop("storageClassName", None)
        manifest["spec"]["storage"].pop("size", None)
    elif "storageClassName" not in spec.get("storage", {}):
        cluster.volume_for_created_claim(name)
    started = time.monotonic()
    cluster.apply(manifest)
    cond = flagged(cluster, name, reason, started)
    assert phrase in cond["message"], cond
    assert cluster.phase(name) in ("Pending", "Partitioning")
    wait_for(f"a {reason} Warning on {name}", lambda: warning(cluster, name, reason))
    text = described(cluster, name)
    assert "Blocked" in text
    assert reason in text
    assert phrase in text


def test_a_quota_that_stops_the_partition_pod_is_flagged(
    control_plane: ControlPlane, namespace: str, crd: None
) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "no-pods"},
            "spec": {"hard": {"pods": "0"}},
        }
    )
    cluster.volume_for_created_claim("quota")
    with run_operator(control_plane, namespace):
        started = time.monotonic()
        cluster.apply(job_manifest("quota"))
        cond = flagged(cluster, "quota", "FailedCreate", started)
        assert "Job quota-partition" in cond["message"]
        assert "exceeded quota" in cond["message"]
        assert "exceeded quota" in described(cluster, "quota")
        # Lifting the quota clears the condition.
        control_plane.kubectl("delete", "resourcequota", "no-pods", "-n", namespace)
        wait_for(
            "Blocked to clear",
            lambda: (cluster.condition("quota", "Blocked") or {}).get("status") == "False",
            timeout=FLAG_BOUND,
        )


def _deny_jobs(control_plane: ControlPlane, namespace: str) -> str:
    """An admission policy that refuses every batch Job in the namespace with 422 Invalid."""
    name = f"deny-jobs-{namespace}"
    control_plane.apply(
        [
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": name},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": ["batch"],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["jobs"],
                            }
                        ]
                    },
                    "validations": [
                        {
                            "expression": "false",
                            "message": "batch Jobs are not allowed in this namespace",
                            "reason": "Invalid",
                        }
                    ],
                },
            },
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": name},
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace}
                        }
                    },
                },
            },
        ]
    )
    probe = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
            }
        },
    }

    def enforced() -> bool:
        result = control_plane.kubectl(
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-f",
            "-",
            input=json.dumps(probe),
            check=False,
        )
        return result.returncode != 0 and "not allowed" in result.stderr

    wait_for("the admission policy to be enforced", enforced)
    return name


def test_a_child_the_api_server_refuses_fails_the_job(
    control_plane: ControlPlane, namespace: str, crd: None, fast_retries: None
) -> None:
    cluster = Cluster(control_plane, namespace)
    policy = _deny_jobs(control_plane, namespace)
    cluster.volume_for_created_claim("refused")
    try:
        with run_operator(control_plane, namespace):
            started = time.monotonic()
            cluster.apply(job_manifest("refused"))
            failed = flagged(cluster, "refused", "ChildRejected", started)
            status = cluster.wait_phase("refused", "Failed", timeout=FLAG_BOUND)
            FLAGGED["refused"] = time.monotonic() - started
    finally:
        for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
            control_plane.kubectl("delete", kind, policy, "--ignore-not-found")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ChildRejected"
    assert "Job refused-partition" in failed["message"]
    assert f"{REJECTION_LIMIT} times (422 Invalid)" in failed["message"]
    assert "not allowed in this namespace" in failed["message"]
    assert status["childRejections"] == REJECTION_LIMIT
    # Each refusal was reported as it happened, quoting the API server.
    refusals = warning(cluster, "refused", "ChildRejected")
    assert any("attempt 1 of" in m and "not allowed in this namespace" in m for m in refusals)
    text = described(cluster, "refused")
    assert "Failed" in text
    assert "not allowed in this namespace" in text


def test_summary(request: pytest.FixtureRequest) -> None:
    """Report how long each stuck job took to be flagged."""
    if FLAGGED:
        slowest = max(FLAGGED, key=lambda k: FLAGGED[k])
        report(
            request.config,
            f"stuck children: {len(FLAGGED)} jobs flagged, slowest {slowest} after "
            f"{FLAGGED[slowest]:.1f}s ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(FLAGGED.items()))
            + ")",
        )
    assert all(v <= FLAG_BOUND for v in FLAGGED.values())
