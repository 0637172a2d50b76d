"""The status of a DistGNNJob: phase, conditions, partition, progress and Kueue admission."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from distgnn_api.base_model import Model
from distgnn_api.training import EvaluationKind


class Phase(StrEnum):
    pending = "Pending"
    partitioning = "Partitioning"
    training = "Training"
    succeeded = "Succeeded"
    failed = "Failed"
    suspended = "Suspended"
    queued = "Queued"


TERMINAL_PHASES = frozenset({Phase.succeeded, Phase.failed})


class Condition(Model):
    """A status condition, with the usual Kubernetes fields."""

    type: str
    """Condition type, e.g. Partitioned, Training, Succeeded, Failed, Suspended."""
    status: Literal["True", "False", "Unknown"]
    """True, False or Unknown."""
    reason: str
    """One-word CamelCase reason."""
    message: str = ""
    """Human-readable detail."""
    last_transition_time: str
    """RFC 3339 time of the last change of status."""


class PartitionStatus(Model):
    """What the job knows of its partitions."""

    key: str
    """Content key of the partition: a hash of the dataset and partition specs."""
    num_partitions: int
    """Number of partitions."""
    path: str
    """Directory of the partition on the volume."""
    reused: bool = False
    """True when a complete partition with this key existed and the step was skipped."""


class Progress(Model):
    """Training progress, as reported by trainer 0."""

    epoch: int = 0
    """Epochs completed."""
    epochs: int = 0
    """Epochs in total."""
    seeds_per_second: float = 0.0
    """Training throughput of the whole job, in seed nodes per second."""
    loss: float | None = None
    """Last training loss."""
    val_accuracy: float | None = None
    """Last validation accuracy."""
    val_accuracy_kind: EvaluationKind | None = None
    """How valAccuracy was computed: full (full-neighbourhood) or sampled (training fanout)."""
    test_accuracy: float | None = None
    """Test accuracy, once evaluated."""
    test_accuracy_kind: EvaluationKind | None = None
    """How testAccuracy was computed: full (full-neighbourhood) or sampled (training fanout)."""
    val_mrr: float | None = None
    """Link prediction: last validation MRR."""
    test_mrr: float | None = None
    """Link prediction: test MRR, once evaluated."""
    test_hits: dict[str, float] | None = None
    """Link prediction: test Hits@K by K, once evaluated."""
    feature_cache_hit_ratio: float | None = None
    """Share of remote feature look-ups the hot cache served (trainer 0, since the start)."""
    feature_gpu_tier_hit_ratio: float | None = None
    """With samplers.featureMemory below the table: share of gathered rows the GPU tier held (the rest were read from pinned host memory)."""
    last_update_time: str | None = None
    """RFC 3339 time of the report."""


class KueueStatus(Model):
    """What Kueue says of the job's Workload."""

    workload: str
    """Name of the Workload the operator created for the job."""
    admitted: bool = False
    """True while Kueue admits the Workload (the job may run)."""
    cluster_queue: str | None = None
    """ClusterQueue that admitted the Workload."""
    reason: str = ""
    """Kueue's reason: why the Workload waits (e.g. Pending, Preempted) or Admitted."""
    message: str = ""
    """Kueue's message for that reason."""


class DistGNNJobStatus(Model):
    """Observed state of a DistGNNJob, computed by the operator."""

    phase: Phase = Phase.pending
    """Pending, Partitioning, Training, Succeeded, Failed, Suspended or Queued (waiting for
    Kueue to admit the job's Workload)."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions explaining every transition and failure."""
    partition: PartitionStatus | None = None
    """The partition this job trains on."""
    progress: Progress | None = None
    """Training progress."""
    restarts: int = 0
    """Gang restarts so far."""
    child_rejections: int = 0
    """Times in a row the API server refused one of the job's children; at the operator's limit (childRejectionLimit) the job is Failed."""
    start_time: str | None = None
    """RFC 3339 time the job became active."""
    completion_time: str | None = None
    """RFC 3339 time the job Succeeded or Failed."""
    observed_generation: int | None = None
    """metadata.generation this status reflects."""
    kueue: KueueStatus | None = None
    """The job's Kueue Workload, for a job labelled kueue.x-k8s.io/queue-name."""
