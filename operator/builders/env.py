"""The contract env of a workload container: every variable of distgnn_api.contract."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import (
    CONFIG_FILE_NAME,
    CONFIG_MOUNT_DIR,
    DATA_MOUNT_PATH,
    DDP_PORT,
    DEFAULT_RENDEZVOUS_TIMEOUT_S,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    ENV_CONFIG,
    ENV_DATA_DIR,
    ENV_DDP_PORT,
    ENV_DEVICE,
    ENV_JOB_NAME,
    ENV_JOB_UID,
    ENV_METRICS_PORT,
    ENV_NAMESPACE,
    ENV_NODE_NAME,
    ENV_NUM_SAMPLERS,
    ENV_NUM_TRAINERS,
    ENV_PARTITION_DIR,
    ENV_PROCS_PER_POD,
    ENV_RANK,
    ENV_RENDEZVOUS_TIMEOUT,
    ENV_ROLE,
    ENV_RUN_DIR,
    ENV_SAMPLER_ADDRS,
    ENV_SHUTDOWN_TIMEOUT,
    ENV_TRAINER_ADDRS,
    RPC_PORT,
    Role,
    partition_dir,
    peer_addrs,
    run_dir,
)
from distgnn_operator.builders.context import JobContext
from distgnn_operator.constants import LABEL_POD_INDEX


def _value(name: str, value: object) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def rank_env(role: Role) -> dict[str, Any]:
    """ENV_RANK: the StatefulSet pod index for peers; 0 for the single partition pod."""
    if role is Role.partitioner:
        return _value(ENV_RANK, 0)
    return {
        "name": ENV_RANK,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LABEL_POD_INDEX}']"}},
    }


def build_env(ctx: JobContext, role: Role) -> list[dict[str, Any]]:
    """Every contract variable for a container of the given role, in a stable order."""
    spec = ctx.spec
    return [
        _value(ENV_ROLE, role.value),
        rank_env(role),
        _value(ENV_NUM_TRAINERS, spec.trainers.replicas),
        _value(ENV_NUM_SAMPLERS, spec.samplers.replicas),
        _value(ENV_PROCS_PER_POD, max(1, spec.trainers.gpus_per_pod)),
        _value(
            ENV_TRAINER_ADDRS,
            peer_addrs(ctx.name, Role.trainer, spec.trainers.replicas, ctx.namespace, RPC_PORT),
        ),
        _value(
            ENV_SAMPLER_ADDRS,
            peer_addrs(ctx.name, Role.sampler, spec.samplers.replicas, ctx.namespace, RPC_PORT),
        ),
        _value(ENV_DDP_PORT, DDP_PORT),
        _value(ENV_METRICS_PORT, spec.metrics_port),
        _value(ENV_DATA_DIR, DATA_MOUNT_PATH),
        _value(ENV_PARTITION_DIR, partition_dir(DATA_MOUNT_PATH, ctx.partition_key)),
        _value(ENV_RUN_DIR, run_dir(DATA_MOUNT_PATH, ctx.uid)),
        _value(ENV_CONFIG, f"{CONFIG_MOUNT_DIR}/{CONFIG_FILE_NAME}"),
        _value(ENV_JOB_NAME, ctx.name),
        _value(ENV_JOB_UID, ctx.uid),
        _value(ENV_NAMESPACE, ctx.namespace),
        _value(ENV_DEVICE, "cuda" if ctx.gpus(role) > 0 else "cpu"),
        _value(ENV_RENDEZVOUS_TIMEOUT, DEFAULT_RENDEZVOUS_TIMEOUT_S),
        _value(ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_S),
        # the node, for locality: a trainer draws from the sampler nearest to it
        {"name": ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
