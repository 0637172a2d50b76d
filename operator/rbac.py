"""The API access the operator needs, as RBAC rules: the least-privilege set the chart grants.

An integration test runs the operator with a ServiceAccount token bound to exactly these
rules (tests/integration/test_operator_rbac.py).
"""

from __future__ import annotations

from typing import Any

# In every namespace the operator serves (a Role each, or the ClusterRole when cluster-wide).
NAMESPACED_RULES: list[dict[str, Any]] = [
    # Watch the jobs; kopf patches its annotations and finalizer; TTL deletes finished jobs.
    {
        "apiGroups": ["distgnn.io"],
        "resources": ["distgnnjobs"],
        "verbs": ["get", "list", "watch", "patch", "delete"],
    },
    {"apiGroups": ["distgnn.io"], "resources": ["distgnnjobs/status"], "verbs": ["get", "patch"]},
    # Children carry blockOwnerDeletion (needs this where OwnerReferencesPermissionEnforcement is on).
    {"apiGroups": ["distgnn.io"], "resources": ["distgnnjobs/finalizers"], "verbs": ["update"]},
    # The partition Job (suspended and resumed by patch) and the StatefulSets (server-side apply).
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {
        "apiGroups": ["apps"],
        "resources": ["statefulsets"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    # Watched (the reconcile reads its children from the watches), created, adopted by patch.
    {
        "apiGroups": [""],
        "resources": ["configmaps", "services"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    # Watched (a job's claim is read from the watch), created, adopted by patch; the claim
    # also gets the partition marker.
    {
        "apiGroups": [""],
        "resources": ["persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    # Exit codes, trainer 0's IP; a gang restart deletes the pods.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    # The operator's Events and kopf's.
    # Controllers' FailedCreate Events about the job's Job and StatefulSets are read back.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]},
]

# Cluster-wide, however many namespaces are served: kopf discovers CRDs and namespaces.
CLUSTER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
]


# With Kueue (chart kueue.enabled), in every namespace served: the jobs' Workloads.
KUEUE_NAMESPACED_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["get", "list", "watch", "create", "patch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
]

# With Kueue, cluster-wide: flavors (node labels, tolerations) and priority class values.
KUEUE_CLUSTER_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["resourceflavors", "workloadpriorityclasses"],
        "verbs": ["get"],
    }
]


def peering_rules(clusterwide: bool) -> list[dict[str, Any]]:
    """Extra rules of peered replicas (operator.replicas > 1)."""
    resource = "clusterkopfpeerings" if clusterwide else "kopfpeerings"
    return [
        {
            "apiGroups": ["kopf.dev"],
            "resources": [resource],
            "verbs": ["get", "list", "watch", "patch"],
        }
    ]
