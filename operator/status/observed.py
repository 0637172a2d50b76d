"""What the operator observed of a job's children, reduced to the facts status depends on.

The ``from_*`` constructors read raw API objects (dicts) so that :func:`compute_status` stays a
pure function of plain values and is tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distgnn_api.contract import Role
from distgnn_api.spec import Progress
from distgnn_operator.constants import LABEL_POD_INDEX, LABEL_RESTART_GENERATION, LABEL_ROLE
from distgnn_operator.status.admission import AdmissionView
from distgnn_operator.status.blockers import Blocker


@dataclass(frozen=True)
class ContainerExit:
    """A container that terminated: in its current state, or in its last state before a restart."""

    container: str
    exit_code: int
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class PodView:
    """A sampler or trainer pod."""

    name: str
    role: Role
    rank: int | None
    generation: int
    ready: bool = False
    deleting: bool = False
    containers: int = 1
    terminated: tuple[ContainerExit, ...] = ()
    """Containers whose current state is terminated."""
    last_terminated: tuple[ContainerExit, ...] = ()
    """Containers whose last state (before a kubelet restart) is terminated."""
    pod_ip: str | None = None

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodView | None:
        """A view of a StatefulSet pod, or None for pods of other roles."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        try:
            role = Role(labels.get(LABEL_ROLE, ""))
        except ValueError:
            return None
        if role not in (Role.sampler, Role.trainer):
            return None
        status = pod.get("status") or {}
        statuses = status.get("containerStatuses") or []
        terminated: list[ContainerExit] = []
        last: list[ContainerExit] = []
        for cs in statuses:
            for key, out in (("state", terminated), ("lastState", last)):
                term = (cs.get(key) or {}).get("terminated")
                if term is not None and term.get("exitCode") is not None:
                    out.append(
                        ContainerExit(
                            container=str(cs.get("name", "")),
                            exit_code=int(term["exitCode"]),
                            reason=str(term.get("reason") or ""),
                            message=str(term.get("message") or ""),
                        )
                    )
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        spec_containers = (pod.get("spec") or {}).get("containers") or []
        return cls(
            name=str(meta.get("name", "")),
            role=role,
            rank=_int_or_none(labels.get(LABEL_POD_INDEX)),
            generation=_int_or_none(labels.get(LABEL_RESTART_GENERATION)) or 0,
            ready=ready,
            deleting=meta.get("deletionTimestamp") is not None,
            containers=max(1, len(spec_containers)),
            terminated=tuple(terminated),
            last_terminated=tuple(last),
            pod_ip=status.get("podIP") or None,
        )

    def failures(self) -> tuple[ContainerExit, ...]:
        """Non-zero exits, current or last."""
        return tuple(e for e in self.terminated + self.last_terminated if e.exit_code != 0)

    def exited_ok(self) -> bool:
        """Every container has exited 0 (now, or before the kubelet restarted it)."""
        ok = {e.container for e in self.terminated + self.last_terminated if e.exit_code == 0}
        return len(ok) >= self.containers and not self.failures()


@dataclass(frozen=True)
class PartitionJobView:
    """The partition Job."""

    name: str
    complete: bool = False
    failed: bool = False
    reason: str = ""
    message: str = ""
    suspended: bool = False

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> PartitionJobView:
        """Read the Job's terminal conditions (Complete / Failed) and suspension."""
        conds = {
            c.get("type"): c
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("status") == "True"
        }
        failed = conds.get("Failed") or {}
        return cls(
            name=str((job.get("metadata") or {}).get("name", "")),
            complete="Complete" in conds,
            failed="Failed" in conds,
            reason=str(failed.get("reason") or ("Failed" if failed else "")),
            message=str(failed.get("message") or ""),
            suspended=bool((job.get("spec") or {}).get("suspend")),
        )


@dataclass(frozen=True)
class StatefulSetView:
    """A sampler or trainer StatefulSet."""

    role: Role
    replicas: int
    ready_replicas: int = 0
    template_hash: str = ""


@dataclass(frozen=True)
class Observed:
    """Everything compute_status reads about the world."""

    claim: str = ""
    """The claim the job mounts (for messages)."""
    partition_job_name: str = ""
    """Name of the job's partition Job, present or not (for messages)."""
    partition_marker: bool = False
    """The claim carries the complete-marker annotation for this job's partition key."""
    partition_job: PartitionJobView | None = None
    statefulsets: Mapping[Role, StatefulSetView] = field(default_factory=dict)
    pods: tuple[PodView, ...] = ()
    progress: Progress | None = None
    """What trainer 0 served at /progress, if it was reachable."""
    blockers: tuple[Blocker, ...] = ()
    """What the cluster says keeps a child from being created or from starting."""
    admission: AdmissionView | None = None
    """The job's Kueue Workload; None for a job Kueue does not manage."""

    def current_pods(self, role: Role, generation: int) -> list[PodView]:
        """Live pods of a role created since the last gang restart."""
        return [
            p for p in self.pods if p.role is role and p.generation == generation and not p.deleting
        ]


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
