"""Constants of the operator: label keys, annotations, resource names and condition reasons.

Env var names, mount paths and ports are part of the operator-workload contract and live in
:mod:`distgnn_api.contract`; this module holds what only the operator and its children use.
"""

from __future__ import annotations

from typing import NamedTuple

# --------------------------------------------------------------------------- labels

LABEL_JOB = "distgnn.io/job-name"  # the owning DistGNNJob's name, on every child and pod
LABEL_ROLE = "distgnn.io/role"  # partition | sampler | trainer
LABEL_PEER = "distgnn.io/peer"  # "true" on sampler/trainer pods: the headless Service selects them
LABEL_RESTART_GENERATION = "distgnn.io/restart-generation"  # status.restarts at pod creation
LABEL_POD_INDEX = "apps.kubernetes.io/pod-index"  # set by the StatefulSet controller: the rank
LABEL_APP_NAME = "app.kubernetes.io/name"  # always APP_NAME
LABEL_APP_INSTANCE = "app.kubernetes.io/instance"  # the job name
LABEL_APP_COMPONENT = "app.kubernetes.io/component"  # the role
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"  # always MANAGER
LABEL_NAMESPACE_NAME = "kubernetes.io/metadata.name"  # set by the API server on every namespace
# Kueue's labels (its documented opt-in): the LocalQueue a job is queued in, its
# WorkloadPriorityClass, and the UID of the job a Workload belongs to.
LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
LABEL_KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"

APP_NAME = "distgnn"  # value of LABEL_APP_NAME
MANAGER = "distgnn-operator"  # value of LABEL_MANAGED_BY
PEER_TRUE = "true"  # value of LABEL_PEER

# --------------------------------------------------------------------------- annotations

ANNOTATION_TEMPLATE_HASH = "distgnn.io/template-hash"  # digest of a StatefulSet's pod template
PARTITION_MARKER_PREFIX = "partitions.distgnn.io/"  # + key, on a claim: that set is complete
PARTITION_COMPLETE = "complete"  # value of a partition marker annotation
PARTITION_FIGURES_PREFIX = "partition-figures.distgnn.io/"  # + key, on a claim: its figures JSON

# --------------------------------------------------------------------------- API machinery

FIELD_MANAGER = "distgnn-operator"  # field manager of every write the operator makes
EVENT_COMPONENT = "distgnn-operator"  # source.component / reportingController of Events
KOPF_PREFIX = "distgnn.io"  # prefix of kopf's progress and diff-base annotations
FINALIZER = "distgnn.io/finalizer"  # kopf's finalizer, kept on a job while its timer runs
GPU_RESOURCE = "nvidia.com/gpu"  # extended resource of a GPU

# --------------------------------------------------------------------------- pods

VOLUME_DATA = "data"  # the shared volume (the claim)
VOLUME_CONFIG = "config"  # the job config ConfigMap
VOLUME_SHM = "shm"  # memory-backed /dev/shm for torch's shared memory
PORT_RPC = "rpc"  # torch RPC (TensorPipe) listener
PORT_DDP = "ddp"  # trainer 0's torch.distributed store
PORT_METRICS = "metrics"  # Prometheus /metrics and /progress
PYTHON = "python"  # the interpreter in the workload image

# --------------------------------------------------------------------------- conditions

COND_PARTITIONED = "Partitioned"  # the partition set is complete (built or reused)
COND_TRAINING = "Training"  # the sampler and trainer StatefulSets are running
COND_SUSPENDED = "Suspended"  # runPolicy.suspend is set and the pods are gone
COND_SUCCEEDED = "Succeeded"  # every trainer exited 0
COND_FAILED = "Failed"  # the job failed; the reason says why
COND_BLOCKED = "Blocked"  # something keeps a child from being created or from starting
COND_CAPACITY = "CapacityFits"  # the job's resources hold its capacity plan (False: they do not)
COND_QUEUED = "Queued"  # the job waits for Kueue to admit its Workload (False once admitted)

# Conditions that cannot be True together: setting the key True flips the values to False.
EXCLUSIVE_CONDITIONS: dict[str, frozenset[str]] = {
    COND_TRAINING: frozenset({COND_SUSPENDED, COND_SUCCEEDED, COND_FAILED, COND_QUEUED}),
    COND_SUSPENDED: frozenset({COND_TRAINING}),
    COND_QUEUED: frozenset({COND_TRAINING}),
    COND_SUCCEEDED: frozenset({COND_TRAINING, COND_FAILED}),
    COND_FAILED: frozenset({COND_TRAINING, COND_SUCCEEDED}),
}


class Reason(NamedTuple):
    """A condition (or Event) reason with its message template."""

    reason: str
    message: str

    def format(self, **values: object) -> tuple[str, str]:
        """The reason and the message filled in."""
        return self.reason, self.message.format(**values)


# Partitioned
PARTITION_WAITING = Reason("PartitionJobPending", "creating the partition Job {job}")
PARTITION_RUNNING = Reason("PartitionJobRunning", "partition Job {job} is writing {path}")
PARTITION_SUSPENDED = Reason("PartitionJobSuspended", "partition Job {job} is suspended")
PARTITION_SUCCEEDED = Reason("PartitionJobSucceeded", "partition Job {job} wrote {path}")
PARTITION_REUSED = Reason(
    "PartitionReused",
    "claim {claim} already holds the complete partition {path}; the partition step is skipped",
)
PARTITION_FAILED = Reason(
    "PartitionJobFailed", "partition Job {job} failed ({job_reason}): {job_message}"
)

# Training
TRAINING_STARTING = Reason(
    "TrainersStarting",
    "{trainers_ready}/{trainers} trainers and {samplers_ready}/{samplers} samplers up",
)
TRAINING_RUNNING = Reason(
    "TrainersRunning",
    "{trainers_ready}/{trainers} trainers and {samplers_ready}/{samplers} samplers up",
)
GANG_RESTART = Reason(
    "GangRestart",
    "pod {pod} container {container} exited with code {exit_code}; "
    "restarting every pod from the last checkpoint (restart {restarts} of {limit})",
)
TRAINING_STOPPED = Reason("TrainingStopped", "training stopped: {why}")

# Suspended
JOB_SUSPENDED = Reason("JobSuspended", "runPolicy.suspend is true; the job's pods are removed")
JOB_RESUMED = Reason("JobResumed", "runPolicy.suspend is false; the job continues")

# Queued (Kueue): while waiting, the reason and message are Kueue's own (from the Workload)
KUEUE_WAITING = Reason(
    "WorkloadCreated", "Workload {workload} waits for Kueue in LocalQueue {queue}"
)
KUEUE_ADMITTED = Reason(
    "Admitted", "Workload {workload} is admitted by ClusterQueue {cluster_queue}"
)
# Queued and Blocked (Kueue): a Kueue object cannot serve the job (a missing
# WorkloadPriorityClass or ResourceFlavor, a refused Workload, no Kueue API): the job waits
KUEUE_ERROR = Reason(
    "KueueError", "{message}; the job creates no pods until this is fixed (retried)"
)
# Blocked: Kueue's own integration took over a child (its webhook gave it a queue)
KUEUE_MANAGES_CHILD = Reason(
    "KueueManagesChild",
    "{kind} {name} has label {label}={queue}, which the job did not give it: Kueue's webhook "
    "queued it apart from the job (a LocalQueue named default in the namespace, or "
    "manageJobsWithoutQueueName), so Kueue may suspend it and count it twice; list "
    "DistGNNJob.v1alpha1.distgnn.io in Kueue's integrations.externalFrameworks (README: Kueue), "
    "then create the job again",
)
# Kueue's Workload conditions the operator writes, as Kueue's own job integrations do
KUEUE_FINISHED_SUCCEEDED = "Succeeded"  # Finished reason of a Succeeded job
KUEUE_FINISHED_FAILED = "Failed"  # Finished reason of a Failed job
KUEUE_REQUEUE_REASON = "Pending"  # QuotaReserved reason once an evicted job's pods are gone

# Succeeded
TRAINERS_SUCCEEDED = Reason("TrainersSucceeded", "all {trainers} trainers exited 0")

# Failed (the partition Job's failure uses the Job's own reason: see PARTITION_FAILED)
BACKOFF_LIMIT_EXCEEDED = Reason(
    "BackoffLimitExceeded",
    "pod {pod} container {container} exited with code {exit_code} after {restarts} gang "
    "restarts; runPolicy.backoffLimit is {limit}",
)
BAD_INPUT = Reason(
    "BadInput",
    "pod {pod} container {container} exited with code {exit_code} (bad input: restarting "
    "cannot help); see its log",
)
DEADLINE_EXCEEDED = Reason(
    "DeadlineExceeded", "the job was active longer than runPolicy.activeDeadlineSeconds ({limit}s)"
)
INVALID_SPEC = Reason("InvalidSpec", "the spec is invalid: {error}")
CHILD_REJECTED_FAILED = Reason(
    "ChildRejected",
    "the API server refused {kind} {name} {attempts} times ({code} {status}): {message}; "
    "fix the spec and create the job again",
)

# Blocked: the API server or the cluster keeps a child from being created or from starting
CHILD_REJECTED = Reason(
    "ChildRejected",
    "the API server refused {kind} {name} ({code} {status}): {message} "
    "(attempt {attempt} of {limit}; the job fails at the last)",
)
FAILED_CREATE = Reason("FailedCreate", "{kind} {name} cannot create its pods: {message}")
CLAIM_NOT_FOUND = Reason(
    "ClaimNotFound",
    "PersistentVolumeClaim {claim} (storage.claimName) does not exist; create it or change "
    "storage.claimName",
)
CLAIM_LOST = Reason("ClaimLost", "PersistentVolumeClaim {claim} lost its volume")
POD_UNSCHEDULABLE = Reason("PodUnschedulable", "pod {pod} cannot be scheduled: {message}")
IMAGE_PULL_FAILED = Reason(
    "ImagePullFailed", "pod {pod} cannot pull image {image} ({why}): {message}"
)
CONTAINER_CREATE_FAILED = Reason(
    "ContainerCreateFailed", "pod {pod} container {container} cannot start ({why}): {message}"
)
UNBLOCKED = Reason("Unblocked", "the job's children are created and their pods can start")
CHILD_CONFLICT = Reason(
    "ChildConflict", "{kind} {name} exists and is controlled by another owner; delete or rename it"
)

# CapacityFits (and Failed, with the operator's capacity policy fail)
CAPACITY_SHORT = Reason("InsufficientCapacity", "{message}")
# A rule the job breaks for its graph's size, known from the spec (distgnn_api.size_rules).
GRAPH_TOO_SMALL = Reason(
    "SpecDoesNotFitGraph",
    "{errors} (the spec states the graph's size; no partition Job was created)",
)
CAPACITY_FITS = Reason("CapacityFits", "the job's requests and limits hold its capacity plan")

# Events that are not condition changes
TTL_EXPIRED = Reason("TTLExpired", "deleting the job: ttlSecondsAfterFinished ({ttl}s) has passed")
CHILD_CREATED = Reason("Created", "created {kind} {name}")
