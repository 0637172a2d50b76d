"""A job's pods as local processes: the operator's builders render the children, the launch
plan maps each pod to a process. ``distgnn run``, the end-to-end tests and the GPU
benchmark all start their processes from this plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distgnn_api.contract import Role
from distgnn_api.size_rules import size_errors
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.builders import (
    JobContext,
    build_config_map,
    build_partition_job,
    build_statefulset,
)
from distgnn_operator.local.launch_plan import LaunchPlanner, LocalLayout, ProcessSpec

LOCAL_NAMESPACE = "local"


class UnsupportedJobError(ValueError):
    """A valid job that the workload would refuse at start-up, for its graph's size; the
    message names the field to change."""


def check_supported(spec: DistGNNJobSpec) -> None:
    """Refuse, before any process starts, a job the workload would refuse at start-up: the
    size rules of :mod:`distgnn_api.size_rules` (the operator applies them too)."""
    found = size_errors(spec)
    if found:
        raise UnsupportedJobError("; ".join(str(e) for e in found))


@dataclass(frozen=True)
class RenderedJob:
    """The children local mode runs, from the operator's builders."""

    config_map: dict[str, Any]
    partition_job: dict[str, Any] | None  # None when the partition is reused
    statefulsets: dict[Role, dict[str, Any]]  # no sampler StatefulSet in worker mode


@dataclass(frozen=True)
class JobPlan:
    """The processes of a job: the partition step (if any), then samplers and trainers."""

    planner: LaunchPlanner
    partition: Sequence[ProcessSpec]
    workload: Sequence[ProcessSpec]

    @property
    def trainers(self) -> list[ProcessSpec]:
        return [s for s in self.workload if s.role is Role.trainer]


def render_job(name: str, uid: str, spec: DistGNNJobSpec, *, partition_reused: bool) -> RenderedJob:
    """The ConfigMap, partition Job and StatefulSets the operator would create."""
    ctx = JobContext(
        name=name,
        namespace=LOCAL_NAMESPACE,
        uid=uid,
        spec=spec,
        partition_reused=partition_reused,
    )
    roles = [Role.trainer] if spec.worker_mode else [Role.sampler, Role.trainer]
    return RenderedJob(
        config_map=build_config_map(ctx),
        partition_job=None if partition_reused else build_partition_job(ctx),
        statefulsets={role: build_statefulset(ctx, role) for role in roles},
    )


def plan_job(layout: LocalLayout, rendered: RenderedJob, *, threads: int | None = None) -> JobPlan:
    """Every process of a rendered job. ``threads`` (OMP threads per process) defaults to
    all CPUs for the partition step and an equal share of them for each other process."""
    planner = LaunchPlanner(layout, [rendered.config_map])
    for role, sts in rendered.statefulsets.items():
        planner.register(sts, role)
    partition: list[ProcessSpec] = []
    if rendered.partition_job is not None:
        partition = planner.processes(
            rendered.partition_job, Role.partitioner, threads=threads or layout.cpus
        )
    count = sum(int(sts["spec"].get("replicas", 1)) for sts in rendered.statefulsets.values())
    share = threads or max(1, layout.cpus // max(1, count))
    workload = [
        s
        for role, sts in rendered.statefulsets.items()
        for s in planner.processes(sts, role, threads=share)
    ]
    return JobPlan(planner=planner, partition=partition, workload=workload)
