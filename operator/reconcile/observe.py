"""Reads a job's children from the API server and reduces them to status.Observed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from distgnn_api.contract import Role
from distgnn_api.spec import Progress
from distgnn_operator import naming
from distgnn_operator.builders import STATEFUL_ROLES, JobContext
from distgnn_operator.constants import (
    ANNOTATION_TEMPLATE_HASH,
    LABEL_JOB,
    PARTITION_COMPLETE,
)
from distgnn_operator.reconcile.failed_creates import FAILED_CREATE_FIELDS
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    EVENT,
    JOB,
    NETWORK_POLICY,
    POD,
    PVC,
    SERVICE,
    STATEFULSET,
    KubeApi,
)
from distgnn_operator.status import Observed, PartitionJobView, PodView, StatefulSetView
from distgnn_operator.status.blockers import (
    Blocker,
    claim_blockers,
    failed_create_blockers,
    kueue_blockers,
    pod_blockers,
    still_short_of_pods,
)


@dataclass
class Children:
    """The raw children of one job, as the API server has them (None when absent)."""

    config_map: dict[str, Any] | None = None
    claim: dict[str, Any] | None = None
    partition_job: dict[str, Any] | None = None
    service: dict[str, Any] | None = None
    network_policy: dict[str, Any] | None = None
    statefulsets: dict[Role, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    """FailedCreate Events in the namespace (filtered by their object's uid when read)."""
    pods_read: bool = False
    """Whether ``pods`` holds the job's pods (a finished job's are not read)."""

    def partition_marker(self, key: str) -> bool:
        """The claim records that the partition set <key> on it is complete."""
        annotations = ((self.claim or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(naming.partition_marker_annotation(key)) == PARTITION_COMPLETE


def read_children(api: KubeApi, ctx: JobContext, *, finished: bool = False) -> Children:
    """GET every child by its name, and list the job's pods by label. A finished job needs
    only what its cleanup touches: the claim, the partition Job and the StatefulSets. The pods
    (partition pods too) and the controllers' FailedCreate Events tell what blocks a child;
    the Events are read only while a controller is short of pods (none matters otherwise)."""
    ns, name = ctx.namespace, ctx.name
    children = Children(
        claim=api.get(PVC, ns, ctx.claim_name),
        partition_job=api.get(JOB, ns, naming.partition_job_name(name)),
    )
    if not finished:
        children.config_map = api.get(CONFIG_MAP, ns, naming.config_map_name(name))
        children.service = api.get(SERVICE, ns, naming.service_name(name))
        children.network_policy = api.get(NETWORK_POLICY, ns, naming.network_policy_name(name))
    for role in STATEFUL_ROLES:
        sts = api.get(STATEFULSET, ns, naming.statefulset_name(name, role))
        if sts is not None:
            children.statefulsets[role] = sts
    if not finished and (children.statefulsets or children.partition_job is not None):
        children.pods = api.list(POD, ns, {LABEL_JOB: name})
        children.pods_read = True
        if any(still_short_of_pods(kind, obj) for kind, obj in _controllers(children)):
            children.events = api.list(EVENT, ns, {}, FAILED_CREATE_FIELDS)
    return children


def _controllers(children: Children) -> list[tuple[str, dict[str, Any]]]:
    """The job's pod controllers, by kind: the partition Job and the StatefulSets."""
    out = [("Job", children.partition_job)] if children.partition_job is not None else []
    return out + [("StatefulSet", s) for s in children.statefulsets.values()]


def statefulset_view(role: Role, sts: dict[str, Any]) -> StatefulSetView:
    """The replicas and template digest of a StatefulSet."""
    annotations = (sts.get("metadata") or {}).get("annotations") or {}
    return StatefulSetView(
        role=role,
        replicas=int((sts.get("spec") or {}).get("replicas") or 0),
        ready_replicas=int((sts.get("status") or {}).get("readyReplicas") or 0),
        template_hash=str(annotations.get(ANNOTATION_TEMPLATE_HASH, "")),
    )


def blockers(ctx: JobContext, children: Children) -> list[Blocker]:
    """What keeps the job's children from being created or from starting."""
    controllers = [{"kind": kind, **obj} for kind, obj in _controllers(children)]
    return [
        *kueue_blockers(
            [*(c for c in controllers if c), *({"kind": "Pod", **p} for p in children.pods)]
        ),
        *claim_blockers(children.claim, ctx.claim_name, ctx.spec.storage.claim_name is not None),
        *failed_create_blockers(controllers, children.events),
        *pod_blockers(children.pods),
    ]


def to_observed(ctx: JobContext, children: Children, progress: Progress | None) -> Observed:
    """The pure view compute_status reads."""
    views = (PodView.from_pod(p) for p in children.pods)
    return Observed(
        claim=ctx.claim_name,
        partition_job_name=naming.partition_job_name(ctx.name),
        partition_marker=children.partition_marker(ctx.partition_key),
        partition_job=(
            PartitionJobView.from_job(children.partition_job) if children.partition_job else None
        ),
        statefulsets={r: statefulset_view(r, s) for r, s in children.statefulsets.items()},
        pods=tuple(v for v in views if v is not None),
        progress=progress,
        blockers=tuple(blockers(ctx, children)),
    )


def trainer_zero_ip(children: Children, generation: int) -> str | None:
    """The pod IP of the current trainer of rank 0, if it has one."""
    for pod in children.pods:
        view = PodView.from_pod(pod)
        if (
            view is not None
            and view.role is Role.trainer
            and view.rank == 0
            and view.generation == generation
            and not view.deleting
            and view.pod_ip
        ):
            return view.pod_ip
    return None
