"""compute_status: the job's status as a pure function of its spec, its observed children, its
previous status and the time. Status is computed, never accumulated: the only values carried
over are the ones the world cannot show again (restarts, start and completion times, and
whether the partition was reused)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from distgnn_api.capacity import GIB
from distgnn_api.capacity_check import Shortfall
from distgnn_api.contract import Role, partition_key
from distgnn_api.spec import (
    TERMINAL_PHASES,
    Condition,
    DistGNNJobSpec,
    DistGNNJobStatus,
    KueueStatus,
    PartitionStatus,
    Phase,
    Progress,
)
from distgnn_operator import naming
from distgnn_operator.constants import (
    CAPACITY_FITS,
    CAPACITY_SHORT,
    COND_BLOCKED,
    COND_CAPACITY,
    COND_FAILED,
    COND_PARTITIONED,
    COND_QUEUED,
    COND_SUCCEEDED,
    COND_SUSPENDED,
    COND_TRAINING,
    DEADLINE_EXCEEDED,
    JOB_RESUMED,
    JOB_SUSPENDED,
    KUEUE_ADMITTED,
    KUEUE_WAITING,
    PARTITION_FAILED,
    PARTITION_REUSED,
    PARTITION_RUNNING,
    PARTITION_SUCCEEDED,
    PARTITION_SUSPENDED,
    PARTITION_WAITING,
    TRAINERS_SUCCEEDED,
    TRAINING_RUNNING,
    TRAINING_STARTING,
    UNBLOCKED,
    Reason,
)
from distgnn_operator.status import (
    active_deadline,
    capacity_policy,
    failure_policy,
    size_policy,
    success_policy,
    suspend_policy,
)
from distgnn_operator.status.conditions import Status, is_true, set_condition
from distgnn_operator.status.observed import Observed
from distgnn_operator.status.timestamps import format_time

DEFAULT_GPU_MEMORY = 80 * GIB


@dataclass
class _Draft:
    """The status being computed."""

    phase: Phase
    conditions: list[Condition]
    restarts: int
    child_rejections: int
    start_time: str | None
    partition: PartitionStatus
    progress: Progress | None
    observed_generation: int | None
    now: str
    completion_time: str | None = None
    kueue: KueueStatus | None = None

    def set(self, type_: str, status: Status, reason: str, message: str) -> None:
        self.conditions = set_condition(self.conditions, type_, status, reason, message, self.now)

    def set_reason(self, type_: str, status: Status, reason: Reason, **values: object) -> None:
        self.set(type_, status, *reason.format(**values))

    def fail(self, reason: str, message: str) -> None:
        self.phase = Phase.failed
        self.completion_time = self.now
        self.set(COND_FAILED, "True", reason, message)

    def build(self) -> DistGNNJobStatus:
        return DistGNNJobStatus(
            phase=self.phase,
            conditions=self.conditions,
            partition=self.partition,
            progress=self.progress,
            restarts=self.restarts,
            child_rejections=self.child_rejections,
            start_time=self.start_time,
            completion_time=self.completion_time,
            observed_generation=self.observed_generation,
            kueue=self.kueue,
        )


def compute_status(
    spec: DistGNNJobSpec,
    observed: Observed,
    previous: DistGNNJobStatus | None,
    now: datetime,
    *,
    generation: int | None = None,
    capacity: capacity_policy.CapacityPolicy = capacity_policy.CapacityPolicy.warn,
    gpu_memory: int = DEFAULT_GPU_MEMORY,
    shortfalls: list[Shortfall] | None = None,
) -> DistGNNJobStatus:
    """The status the job should have now. Succeeded and Failed are final.

    ``capacity`` and ``gpu_memory`` (one GPU's bytes) are the operator's capacity policy;
    ``shortfalls``, when given, are what that policy finds in the spec (computed otherwise)."""
    prev = previous or DistGNNJobStatus()
    observed_generation = generation if generation is not None else prev.observed_generation
    if prev.phase in TERMINAL_PHASES:
        return prev.model_copy(update={"observed_generation": observed_generation})

    key = partition_key(spec)
    reused = prev.partition.reused if prev.partition is not None else False
    draft = _Draft(
        phase=prev.phase,
        conditions=list(prev.conditions),
        restarts=prev.restarts,
        child_rejections=prev.child_rejections,
        start_time=prev.start_time,
        partition=PartitionStatus(
            key=key,
            num_partitions=spec.num_partitions,
            path=naming.partition_volume_path(key),
            reused=reused,
        ),
        progress=observed.progress or prev.progress,
        observed_generation=observed_generation,
        now=format_time(now),
        kueue=_kueue_status(observed),
    )

    if suspend_policy.is_suspended(spec):
        draft.phase = Phase.suspended
        draft.start_time = None
        draft.set_reason(COND_SUSPENDED, "True", JOB_SUSPENDED)
        return draft.build()
    if is_true(prev.conditions, COND_SUSPENDED):
        draft.set_reason(COND_SUSPENDED, "False", JOB_RESUMED)
    cannot_run = size_policy.failure(spec)
    if cannot_run is not None:
        draft.fail(*cannot_run)
        return draft.build()
    if _queued_stage(observed, prev, draft):
        _blocked_stage(observed, prev, draft)  # e.g. a KueueError keeps the job queued
        return draft.build()
    if draft.start_time is None:
        draft.start_time = draft.now

    if active_deadline.exceeded(spec, draft.start_time, now):
        draft.fail(*DEADLINE_EXCEEDED.format(limit=spec.run_policy.active_deadline_seconds))
        return draft.build()

    if shortfalls is None:
        shortfalls = capacity_policy.shortfalls(spec, capacity, gpu_memory)
    if _capacity_stage(shortfalls, prev, draft, capacity):
        return draft.build()
    if _partition_stage(spec, observed, prev, draft):
        _training_stage(spec, observed, draft)
    _blocked_stage(observed, prev, draft)
    return draft.build()


def _kueue_status(observed: Observed) -> KueueStatus | None:
    gate = observed.admission
    if gate is None:
        return None
    return KueueStatus(
        workload=gate.workload,
        admitted=gate.admitted,
        cluster_queue=gate.cluster_queue,
        reason=gate.reason,
        message=gate.message,
    )


def _queued_stage(observed: Observed, prev: DistGNNJobStatus, draft: _Draft) -> bool:
    """Kueue's gate: Queued (with Kueue's reason) until the Workload is admitted; True while
    the job waits. An evicted job waits again, its pods stopped as a suspended job's are."""
    gate = observed.admission
    if gate is None:
        return False
    if not gate.admitted:
        draft.phase = Phase.queued
        draft.start_time = None
        if gate.reason:
            draft.set(COND_QUEUED, "True", gate.reason, gate.message)
        else:
            draft.set_reason(COND_QUEUED, "True", KUEUE_WAITING, workload=gate.workload,
                             queue=gate.queue)  # fmt: skip
        return True
    if is_true(prev.conditions, COND_QUEUED) or not any(
        c.type == COND_QUEUED for c in prev.conditions
    ):
        draft.set_reason(
            COND_QUEUED, "False", KUEUE_ADMITTED, workload=gate.workload,
            cluster_queue=gate.cluster_queue,
        )  # fmt: skip
    return False


def _capacity_stage(
    found: list[Shortfall],
    prev: DistGNNJobStatus,
    draft: _Draft,
    policy: capacity_policy.CapacityPolicy,
) -> bool:
    """The CapacityFits condition; True when the policy fails the job for it."""
    if not found:
        if any(c.type == COND_CAPACITY and c.status == "False" for c in prev.conditions):
            draft.set_reason(COND_CAPACITY, "True", CAPACITY_FITS)
        return False
    reason, message = CAPACITY_SHORT.format(message=capacity_policy.message(found))
    draft.set(COND_CAPACITY, "False", reason, message)
    started = any(c.type == COND_TRAINING for c in prev.conditions)
    if policy is capacity_policy.CapacityPolicy.fail and not started:
        draft.fail(reason, message)
        return True
    return False


def _blocked_stage(observed: Observed, prev: DistGNNJobStatus, draft: _Draft) -> None:
    """The Blocked condition: what the cluster says keeps a child from starting. A refusal by
    the API server (child_rejections > 0) is the reconciler's to set and to clear."""
    if draft.phase in TERMINAL_PHASES or prev.child_rejections > 0:
        return
    if observed.blockers:
        first = observed.blockers[0]
        more = len(observed.blockers) - 1
        message = first.message + (f" (and {more} more)" if more else "")
        draft.set(COND_BLOCKED, "True", first.reason, message)
    elif is_true(prev.conditions, COND_BLOCKED):
        draft.set_reason(COND_BLOCKED, "False", UNBLOCKED)


def _partition_stage(
    spec: DistGNNJobSpec, observed: Observed, prev: DistGNNJobStatus, draft: _Draft
) -> bool:
    """Update the Partitioned condition; True when the partition is complete."""
    if is_true(prev.conditions, COND_PARTITIONED):
        return True
    job = observed.partition_job
    job_name = job.name if job is not None else observed.partition_job_name
    path = draft.partition.path
    failure = failure_policy.partition_failure(job)
    if job is not None and job.complete:
        draft.set_reason(COND_PARTITIONED, "True", PARTITION_SUCCEEDED, job=job_name, path=path)
        return True
    if failure is not None:
        reason, message = failure
        draft.set(COND_PARTITIONED, "False", PARTITION_FAILED.reason, message)
        draft.fail(reason, message)
        return False
    if observed.partition_marker:
        draft.partition = draft.partition.model_copy(update={"reused": job is None})
        draft.set_reason(
            COND_PARTITIONED, "True", PARTITION_REUSED, claim=observed.claim, path=path
        )
        return True
    if job is None:
        draft.phase = Phase.pending
        draft.set_reason(COND_PARTITIONED, "False", PARTITION_WAITING, job=job_name)
    else:
        draft.phase = Phase.partitioning
        running = PARTITION_SUSPENDED if job.suspended else PARTITION_RUNNING
        draft.set_reason(COND_PARTITIONED, "False", running, job=job_name, path=path)
    return False


def _training_stage(spec: DistGNNJobSpec, observed: Observed, draft: _Draft) -> None:
    """Apply the success and failure policies to the sampler and trainer pods."""
    if success_policy.trainers_succeeded(spec, observed, draft.restarts):
        draft.phase = Phase.succeeded
        draft.completion_time = draft.now
        draft.set_reason(
            COND_SUCCEEDED, "True", TRAINERS_SUCCEEDED, trainers=spec.trainers.replicas
        )
        return
    decision = failure_policy.evaluate(spec, observed, draft.restarts)
    if decision is not None and decision.action is failure_policy.Action.fail:
        draft.fail(decision.reason, decision.message)
        return
    draft.phase = Phase.training
    if decision is not None:
        draft.restarts += 1
        draft.set(COND_TRAINING, "True", decision.reason, decision.message)
        return
    # A pod counts as up while it is ready or once it has exited 0 (finished its work).
    trainers = observed.current_pods(Role.trainer, draft.restarts)
    samplers = observed.current_pods(Role.sampler, draft.restarts)
    counts = {
        "trainers_ready": sum(p.ready or p.exited_ok() for p in trainers),
        "trainers": spec.trainers.replicas,
        "samplers_ready": sum(p.ready or p.exited_ok() for p in samplers),
        "samplers": spec.samplers.replicas,
    }
    all_up = (
        counts["trainers_ready"] >= spec.trainers.replicas
        and counts["samplers_ready"] >= spec.samplers.replicas
    )
    reason = TRAINING_RUNNING if all_up else TRAINING_STARTING
    draft.set_reason(COND_TRAINING, "True", reason, **counts)
