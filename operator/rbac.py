"""The API access the operator needs, as RBAC rules: the least-privilege set the chart grants.

An integration test runs the operator with a ServiceAccount token bound to exactly these
rules (tests/integration/test_operator_rbac.py).
"""

from __future__ import annotations

from typing import Any

MANAGED = ["get", "list", "watch", "create", "patch"]
"""The verbs on the children the operator watches, creates and adopts (by patch)."""


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    """One RBAC rule: the verbs on the resources of an API group."""
    return {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}


# In every namespace the operator serves (a Role each, or the ClusterRole when cluster-wide).
NAMESPACED_RULES: list[dict[str, Any]] = [
    # Watch the jobs; kopf patches its annotations and finalizer; TTL deletes finished jobs.
    _rule("distgnn.io", ["distgnnjobs"], ["get", "list", "watch", "patch", "delete"]),
    _rule("distgnn.io", ["distgnnjobs/status"], ["get", "patch"]),
    # Children carry blockOwnerDeletion (needs this where OwnerReferencesPermissionEnforcement is on).
    _rule("distgnn.io", ["distgnnjobs/finalizers"], ["update"]),
    # The partition Job (suspended and resumed by patch) and the StatefulSets (server-side apply).
    _rule("batch", ["jobs"], MANAGED),
    _rule("apps", ["statefulsets"], MANAGED),
    # Watched (the reconcile reads its children from the watches), created, adopted by patch.
    _rule("", ["configmaps", "services"], MANAGED),
    # Watched (a job's claim is read from the watch), created, adopted by patch; the claim
    # also gets the partition marker.
    _rule("", ["persistentvolumeclaims"], MANAGED),
    _rule("networking.k8s.io", ["networkpolicies"], MANAGED),
    # Exit codes, trainer 0's IP; a gang restart deletes the pods.
    _rule("", ["pods"], ["get", "list", "watch", "delete"]),
    # The operator's Events and kopf's.
    # Controllers' FailedCreate Events about the job's Job and StatefulSets are read back.
    _rule("", ["events"], ["create", "list"]),
]

# Cluster-wide, however many namespaces are served: kopf discovers CRDs and namespaces.
CLUSTER_RULES: list[dict[str, Any]] = [
    _rule("apiextensions.k8s.io", ["customresourcedefinitions"], ["get", "list", "watch"]),
    _rule("", ["namespaces"], ["get", "list", "watch"]),
]


# With Kueue (chart kueue.enabled), in every namespace served: the jobs' Workloads.
KUEUE_NAMESPACED_RULES: list[dict[str, Any]] = [
    _rule("kueue.x-k8s.io", ["workloads"], MANAGED),
    _rule("kueue.x-k8s.io", ["workloads/status"], ["patch"]),
]

# With Kueue, cluster-wide: flavors (node labels, tolerations) and priority class values.
KUEUE_CLUSTER_RULES: list[dict[str, Any]] = [
    _rule("kueue.x-k8s.io", ["resourceflavors", "workloadpriorityclasses"], ["get"])
]


def peering_rules(clusterwide: bool) -> list[dict[str, Any]]:
    """Extra rules of peered replicas (operator.replicas > 1)."""
    resource = "clusterkopfpeerings" if clusterwide else "kopfpeerings"
    return [_rule("kopf.dev", [resource], ["get", "list", "watch", "patch"])]
