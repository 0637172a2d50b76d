"""What every builder needs to know about one job: its identity, its parsed spec, and facts
the operator has observed (a reused partition, the gang-restart generation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from distgnn_api.contract import Role, partition_key
from distgnn_api.roles import SamplersSpec, TrainersSpec
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator import naming
from distgnn_operator.builders.placement import Placement


@dataclass(frozen=True)
class OperatorPeer:
    """The operator's own pods, which the NetworkPolicy lets read /progress on the metrics port."""

    namespace: str
    pod_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobContext:
    """One DistGNNJob as the builders see it."""

    name: str
    namespace: str
    uid: str
    spec: DistGNNJobSpec
    partition_reused: bool = False
    """True when a complete partition exists on the claim: no partition Job is built."""
    restart_generation: int = 0
    """Gang restarts so far (status.restarts); pod templates carry it so old pods are told apart."""
    operator: OperatorPeer | None = None
    """The operator's pods, admitted to the metrics port; None admits only the monitoring peers."""
    placements: Mapping[Role, Placement] = field(default_factory=dict)
    """Where Kueue's admission puts each role's pods (empty for a job Kueue does not manage)."""

    @property
    def partition_key(self) -> str:
        """Content key of the job's partition."""
        return partition_key(self.spec)

    @property
    def claim_name(self) -> str:
        """The claim every pod mounts."""
        return naming.claim_name(self.name, self.spec)

    def _pods(self, role: Role) -> SamplersSpec | TrainersSpec | None:
        """The spec's section of a role that runs as a StatefulSet (None: the partitioner)."""
        pods: dict[Role, SamplersSpec | TrainersSpec] = {
            Role.sampler: self.spec.samplers,
            Role.trainer: self.spec.trainers,
        }
        return pods.get(role)

    def replicas(self, role: Role) -> int:
        """Pods of a role as the spec asks (the partition Job runs one)."""
        pods = self._pods(role)
        return pods.replicas if pods is not None else 1

    def gpus(self, role: Role) -> int:
        """GPUs per pod of a role."""
        pods = self._pods(role)
        return pods.gpus_per_pod if pods is not None else 0
