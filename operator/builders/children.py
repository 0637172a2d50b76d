"""Every child of a job in creation order: what the operator creates, and what `distgnn render`
prints."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import Role
from distgnn_operator.builders.config_map import build_config_map
from distgnn_operator.builders.context import JobContext
from distgnn_operator.builders.headless_service import build_headless_service
from distgnn_operator.builders.network_policy import build_network_policy
from distgnn_operator.builders.partition_job import build_partition_job
from distgnn_operator.builders.pvc import build_pvc
from distgnn_operator.builders.statefulset import build_statefulset


def build_children(ctx: JobContext) -> list[dict[str, Any]]:
    """NetworkPolicy (first: no pod runs unprotected), ConfigMap, claim, partition Job (unless
    reused), Service and the StatefulSets (no sampler StatefulSet in worker mode)."""
    children: list[dict[str, Any] | None] = [
        build_network_policy(ctx),
        build_config_map(ctx),
        build_pvc(ctx),
        None if ctx.partition_reused else build_partition_job(ctx),
        build_headless_service(ctx),
        None if ctx.spec.worker_mode else build_statefulset(ctx, Role.sampler),
        build_statefulset(ctx, Role.trainer),
    ]
    return [c for c in children if c is not None]
