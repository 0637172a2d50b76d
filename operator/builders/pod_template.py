"""The pod template shared by the partition Job and both StatefulSets: one container running
a role's entry point with the contract env, the volume, the config, /dev/shm and the ports."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import (
    CONFIG_MOUNT_DIR,
    DATA_MOUNT_PATH,
    DDP_PORT,
    RPC_PORT,
    SHM_MOUNT_PATH,
    TERMINATION_LOG_PATH,
    Role,
    role_module,
)
from distgnn_api.spec import ResourceRequirements
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.builders.env import build_env
from distgnn_operator.builders.locality import with_locality
from distgnn_operator.builders.placement import place
from distgnn_operator.constants import (
    GPU_RESOURCE,
    PORT_DDP,
    PORT_METRICS,
    PORT_RPC,
    PYTHON,
    VOLUME_CONFIG,
    VOLUME_DATA,
    VOLUME_SHM,
)


def role_resources(ctx: JobContext, role: Role) -> ResourceRequirements:
    """The spec's resources of a role's container."""
    if role is Role.sampler:
        return ctx.spec.samplers.resources
    if role is Role.trainer:
        return ctx.spec.trainers.resources
    return ctx.spec.partition.resources


def build_resources(ctx: JobContext, role: Role) -> dict[str, Any]:
    """Container resources: the spec's, with nvidia.com/gpu = gpusPerPod in requests and limits."""
    res = role_resources(ctx, role)
    requests = {k: str(v) for k, v in res.requests.items() if k != GPU_RESOURCE}
    limits = {k: str(v) for k, v in res.limits.items() if k != GPU_RESOURCE}
    gpus = ctx.gpus(role)
    if gpus > 0:
        requests[GPU_RESOURCE] = str(gpus)
        limits[GPU_RESOURCE] = str(gpus)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def build_ports(ctx: JobContext, role: Role) -> list[dict[str, Any]]:
    """Named container ports: rpc (peers), ddp (trainers) and metrics (everyone)."""
    ports: list[dict[str, Any]] = []
    if role in (Role.sampler, Role.trainer):
        ports.append({"name": PORT_RPC, "containerPort": RPC_PORT, "protocol": "TCP"})
    if role is Role.trainer:
        ports.append({"name": PORT_DDP, "containerPort": DDP_PORT, "protocol": "TCP"})
    ports.append({"name": PORT_METRICS, "containerPort": ctx.spec.metrics_port, "protocol": "TCP"})
    return ports


def build_container(ctx: JobContext, role: Role) -> dict[str, Any]:
    """The single workload container of a role."""
    images = ctx.spec.images
    return {
        "name": role.value,
        "image": images.gpu if ctx.gpus(role) > 0 else images.cpu,
        "imagePullPolicy": images.pull_policy.value,
        "command": [PYTHON, "-m", role_module(role)],
        "env": build_env(ctx, role),
        "ports": build_ports(ctx, role),
        "resources": build_resources(ctx, role),
        "volumeMounts": [
            {"name": VOLUME_DATA, "mountPath": DATA_MOUNT_PATH},
            {"name": VOLUME_CONFIG, "mountPath": CONFIG_MOUNT_DIR, "readOnly": True},
            {"name": VOLUME_SHM, "mountPath": SHM_MOUNT_PATH},
        ],
        # The partition Job's figures are its termination message (DISTGNN_TERMINATION_LOG).
        **({"terminationMessagePath": TERMINATION_LOG_PATH} if role is Role.partitioner else {}),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def build_volumes(ctx: JobContext) -> list[dict[str, Any]]:
    """The claim, the config ConfigMap and a memory-backed /dev/shm."""
    return [
        {"name": VOLUME_DATA, "persistentVolumeClaim": {"claimName": ctx.claim_name}},
        {"name": VOLUME_CONFIG, "configMap": {"name": naming.config_map_name(ctx.name)}},
        {"name": VOLUME_SHM, "emptyDir": {"medium": "Memory"}},
    ]


def build_pod_spec(ctx: JobContext, role: Role, *, restart_policy: str) -> dict[str, Any]:
    """Pod spec of a role, with the job's scheduling fields."""
    spec = ctx.spec
    sched = spec.scheduling
    pod: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [build_container(ctx, role)],
        "volumes": build_volumes(ctx),
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
    }
    if spec.service_account_name:
        pod["serviceAccountName"] = spec.service_account_name
    else:
        # The workload never talks to the API server: keep the default account's token out.
        pod["automountServiceAccountToken"] = False
    if sched.scheduler_name:
        pod["schedulerName"] = sched.scheduler_name
    if sched.priority_class_name:
        pod["priorityClassName"] = sched.priority_class_name
    if sched.node_selector:
        pod["nodeSelector"] = dict(sched.node_selector)
    if sched.tolerations:
        pod["tolerations"] = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in sched.tolerations
        ]
    user_affinity = sched.affinity.manifest() if sched.affinity is not None else None
    affinity = with_locality(ctx, role, user_affinity)
    if affinity:
        pod["affinity"] = affinity
    if spec.images.pull_secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in spec.images.pull_secrets]
    return pod


def build_pod_metadata(ctx: JobContext, role: Role, labels: dict[str, str]) -> dict[str, Any]:
    """Pod template metadata: the given labels and the user's pod annotations."""
    meta: dict[str, Any] = {"labels": dict(labels)}
    if ctx.spec.scheduling.annotations:
        meta["annotations"] = dict(ctx.spec.scheduling.annotations)
    return meta


def build_pod_template(
    ctx: JobContext, role: Role, labels: dict[str, str], *, restart_policy: str
) -> dict[str, Any]:
    """A role's pod template: its metadata and spec, placed as Kueue admitted the role."""
    template = {
        "metadata": build_pod_metadata(ctx, role, labels),
        "spec": build_pod_spec(ctx, role, restart_policy=restart_policy),
    }
    place(template["metadata"], template["spec"], ctx.placements.get(role))
    return template
