"""Small builders of specs and raw API objects for the operator's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from distgnn_api.contract import PartitionFigures, Role
from distgnn_api.spec import Condition, DistGNNJobSpec, DistGNNJobStatus, parse_spec
from distgnn_operator.constants import (
    LABEL_JOB,
    LABEL_POD_INDEX,
    LABEL_RESTART_GENERATION,
    LABEL_ROLE,
)
from distgnn_operator.status import Observed, PartitionJobView, PodView
from distgnn_operator.status.conditions import find

T0 = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)

FIGURES = PartitionFigures(
    num_partitions=2,
    algorithm="metis",
    step_seconds={"generate": 1.5, "partition": 0.25, "write": 0.5},
    edge_cut=161_601,
    edge_cut_fraction=0.08,
    balance={"nodes": 1.01, "train": 1.0, "edges": 1.04},
)
"""A partition's figures, as its pod reports them."""


def make_spec(**overrides: Any) -> DistGNNJobSpec:
    """A small synthetic job; keyword arguments replace top-level spec fields (camelCase)."""
    data: dict[str, Any] = {"dataset": {"synthetic": {"numNodes": 1000, "numEdges": 4000}}}
    data.update(overrides)
    return parse_spec(data)


def condition(status: DistGNNJobStatus, type_: str) -> Condition:
    """The status's condition of that type; the test fails when it has none."""
    cond = find(status.conditions, type_)
    assert cond is not None, f"no {type_} condition in {status.conditions}"
    return cond


def raw_pod(
    job: str,
    role: Role,
    rank: int,
    *,
    generation: int = 0,
    ready: bool = True,
    exit_code: int | None = None,
    last_exit_code: int | None = None,
    deleting: bool = False,
    ip: str | None = "10.0.0.1",
) -> dict[str, Any]:
    """A StatefulSet pod as the API server returns it."""
    state: dict[str, Any] = {"running": {"startedAt": "2026-11-26T12:00:00Z"}}
    if exit_code is not None:
        state = {
            "terminated": {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
            }
        }
    last: dict[str, Any] = {}
    if last_exit_code is not None:
        last = {"terminated": {"exitCode": last_exit_code, "reason": "Error"}}
    meta: dict[str, Any] = {
        "name": f"{job}-{role.value}-{rank}",
        "labels": {
            LABEL_JOB: job,
            LABEL_ROLE: role.value,
            LABEL_POD_INDEX: str(rank),
            LABEL_RESTART_GENERATION: str(generation),
        },
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True" if ready and exit_code is None else "False"}
        ],
        "containerStatuses": [{"name": role.value, "state": state, "lastState": last}],
    }
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "spec": {"containers": [{"name": role.value}]}, "status": status}


def pods(job: str, spec: DistGNNJobSpec, **kwargs: Any) -> tuple[PodView, ...]:
    """Views of every sampler and trainer pod of a job, all with the same state."""
    out: list[PodView] = []
    for role, n in ((Role.sampler, spec.samplers.replicas), (Role.trainer, spec.trainers.replicas)):
        for rank in range(n):
            view = PodView.from_pod(raw_pod(job, role, rank, **kwargs))
            assert view is not None
            out.append(view)
    return tuple(out)


def raw_job(
    name: str, *, complete: bool = False, failed: str | None = None, suspend: bool = False
) -> dict[str, Any]:
    """A batch/v1 Job with its terminal condition."""
    conditions: list[dict[str, Any]] = []
    if complete:
        conditions.append({"type": "Complete", "status": "True"})
    if failed:
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": failed,
                "message": "Job has reached the specified backoff limit",
            }
        )
    return {
        "metadata": {"name": name},
        "spec": {"suspend": suspend},
        "status": {"conditions": conditions},
    }


def partition_done(name: str = "demo-partition") -> Observed:
    """Observed world right after the partition Job completed, before any pods exist."""
    return Observed(partition_job=PartitionJobView.from_job(raw_job(name, complete=True)))
