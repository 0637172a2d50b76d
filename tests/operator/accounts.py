"""A ServiceAccount bound to exactly some RBAC rules, for running the operator with its token."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from tests.support.controlplane import ControlPlane


def _apply(plane: ControlPlane, *docs: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))


@contextlib.contextmanager
def bound_account(
    plane: ControlPlane,
    namespace: str,
    namespaced_rules: list[dict[str, Any]],
    cluster_rules: list[dict[str, Any]],
    name: str = "distgnn-operator",
) -> Iterator[str]:
    """ServiceAccount ``name`` with a Role of ``namespaced_rules`` in the namespace and a
    ClusterRole of ``cluster_rules``; the ClusterRole goes when the block ends."""
    cluster_role = f"{name}-{namespace}"
    subject = {"kind": "ServiceAccount", "name": name, "namespace": namespace}
    rbac_api = "rbac.authorization.k8s.io"
    _apply(
        plane,
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": f"{rbac_api}/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": namespace}, "rules": namespaced_rules},
        {"apiVersion": f"{rbac_api}/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": namespace},
         "roleRef": {"apiGroup": rbac_api, "kind": "Role", "name": name},
         "subjects": [subject]},
        {"apiVersion": f"{rbac_api}/v1", "kind": "ClusterRole",
         "metadata": {"name": cluster_role}, "rules": cluster_rules},
        {"apiVersion": f"{rbac_api}/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": cluster_role},
         "roleRef": {"apiGroup": rbac_api, "kind": "ClusterRole", "name": cluster_role},
         "subjects": [subject]},
    )  # fmt: skip
    try:
        yield name
    finally:
        plane.kubectl(
            "delete", "clusterrolebinding,clusterrole", cluster_role, "--ignore-not-found",
            check=False,
        )  # fmt: skip
