"""The Kueue Workload of a DistGNNJob: one object that asks Kueue for quota for all of the
job's pods at once (the partition pod, the samplers and the trainers), as one gang.

Kueue admits a Workload whole or not at all, and only its pod sets' counts and container
requests count against a ClusterQueue's quota. Each pod set is named after its role, so an
admission's flavor assignments map back onto the role's pod template.
"""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import Role
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.builders.partition_job import build_partition_job
from distgnn_operator.builders.statefulset import build_statefulset
from distgnn_operator.constants import LABEL_KUEUE_JOB_UID

API_VERSION = "kueue.x-k8s.io/v1beta2"
KIND = "Workload"
PRIORITY_CLASS_GROUP = "kueue.x-k8s.io"
PRIORITY_CLASS_KIND = "WorkloadPriorityClass"
WORKLOAD_ROLES = (Role.partitioner, Role.sampler, Role.trainer)
# What Kueue reads of a pod template: requests, and where the pods may go.
_SPEC_KEYS = ("nodeSelector", "tolerations", "affinity", "priorityClassName", "schedulerName")
_CONTAINER_KEYS = ("name", "image", "resources")


def _role_template(ctx: JobContext, role: Role) -> dict[str, Any]:
    if role is Role.partitioner:
        template: dict[str, Any] = build_partition_job(ctx)["spec"]["template"]
    else:
        template = build_statefulset(ctx, role)["spec"]["template"]
    return template


def pod_set_template(ctx: JobContext, role: Role) -> dict[str, Any]:
    """A role's pod template, reduced to what Kueue needs (requests and placement)."""
    template = _role_template(ctx, role)
    spec = template["spec"]
    reduced: dict[str, Any] = {k: spec[k] for k in _SPEC_KEYS if k in spec}
    reduced["containers"] = [
        {k: c[k] for k in _CONTAINER_KEYS if k in c} for c in spec.get("containers") or []
    ]
    return {"metadata": {"labels": dict(template["metadata"].get("labels") or {})}, "spec": reduced}


def build_pod_sets(ctx: JobContext) -> list[dict[str, Any]]:
    """One pod set per role that runs pods (no sampler pod set in worker mode)."""
    return [
        {"name": role.value, "count": ctx.replicas(role), "template": pod_set_template(ctx, role)}
        for role in WORKLOAD_ROLES
        if ctx.replicas(role) > 0
    ]


def build_workload(
    ctx: JobContext, queue: str, priority_class: str | None = None, priority: int | None = None
) -> dict[str, Any]:
    """Workload <kind>-<job>-<hash> in the job's namespace, queued in LocalQueue ``queue``;
    ``priority_class`` names a WorkloadPriorityClass whose ``priority`` value is given."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": build_pod_sets(ctx),
        "active": not ctx.spec.run_policy.suspend,
    }
    if priority_class:
        spec["priorityClassRef"] = {
            "group": PRIORITY_CLASS_GROUP,
            "kind": PRIORITY_CLASS_KIND,
            "name": priority_class,
        }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": naming.workload_name(ctx.name, ctx.uid),
            "namespace": ctx.namespace,
            "labels": naming.child_labels(ctx.name) | {LABEL_KUEUE_JOB_UID: ctx.uid},
        },
        "spec": spec,
    }
