"""The contract env of a workload container: :meth:`WorkloadEnv.to_environ`, as pod env.

The values come from the contract's one writer; what a pod learns only at run time is a
``fieldRef`` instead of a value: its rank (the StatefulSet pod index) and its node (for
locality: a trainer draws from the sampler nearest to it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distgnn_api.contract import (
    CONFIG_FILE_NAME,
    CONFIG_MOUNT_DIR,
    DATA_MOUNT_PATH,
    DDP_PORT,
    DEFAULT_RENDEZVOUS_TIMEOUT_S,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    ENV_NODE_NAME,
    ENV_RANK,
    RPC_PORT,
    TERMINATION_LOG_PATH,
    Role,
    WorkloadEnv,
    parse_addrs,
    partition_dir,
    peer_addrs,
    run_dir,
)
from distgnn_operator.builders.context import JobContext
from distgnn_operator.constants import LABEL_POD_INDEX


def rank_env(role: Role) -> dict[str, Any]:
    """ENV_RANK: the StatefulSet pod index for peers; 0 for the single partition pod."""
    if role is Role.partitioner:
        return {"name": ENV_RANK, "value": "0"}
    return {
        "name": ENV_RANK,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LABEL_POD_INDEX}']"}},
    }


def workload_env(ctx: JobContext, role: Role) -> WorkloadEnv:
    """The contract a container of the given role gets (rank 0: pods read theirs at run time)."""
    spec = ctx.spec

    def addrs(peer: Role, replicas: int) -> str:
        return peer_addrs(ctx.name, peer, replicas, ctx.namespace, RPC_PORT)

    return WorkloadEnv(
        role=role,
        rank=0,
        num_trainers=spec.trainers.replicas,
        num_samplers=spec.samplers.replicas,
        procs_per_pod=max(1, spec.trainers.gpus_per_pod),
        trainer_addrs=parse_addrs(addrs(Role.trainer, spec.trainers.replicas), "trainers"),
        sampler_addrs=parse_addrs(addrs(Role.sampler, spec.samplers.replicas), "samplers"),
        ddp_port=DDP_PORT,
        metrics_port=spec.metrics_port,
        data_dir=Path(DATA_MOUNT_PATH),
        partition_dir=partition_dir(DATA_MOUNT_PATH, ctx.partition_key),
        run_dir=run_dir(DATA_MOUNT_PATH, ctx.uid),
        config_path=Path(CONFIG_MOUNT_DIR) / CONFIG_FILE_NAME,
        job_name=ctx.name,
        job_uid=ctx.uid,
        namespace=ctx.namespace,
        device="cuda" if ctx.gpus(role) > 0 else "cpu",
        rendezvous_timeout_s=DEFAULT_RENDEZVOUS_TIMEOUT_S,
        shutdown_timeout_s=DEFAULT_SHUTDOWN_TIMEOUT_S,
        # The partition Job's figures leave through its termination message.
        termination_log=Path(TERMINATION_LOG_PATH) if role is Role.partitioner else None,
    )


def build_env(ctx: JobContext, role: Role) -> list[dict[str, Any]]:
    """Every contract variable for a container of the given role, in a stable order."""
    env = [
        rank_env(role) if name == ENV_RANK else {"name": name, "value": value}
        for name, value in workload_env(ctx, role).to_environ().items()
    ]
    env.append({"name": ENV_NODE_NAME, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    return env
