"""The DistGNNJob API: pydantic models of the custom resource's spec and status.

These models are the single source of truth for the ``DistGNNJob`` resource. The CRD's
OpenAPI schema (descriptions, defaults, enums, bounds and the CEL rules in
``x-kubernetes-validations``) is generated from them, the operator parses every object
through them at handler entry, and the workload reads the job config through them.

Cross-field rules are written twice on purpose: once as a CEL expression that the API
server enforces at ``kubectl apply``, and once as a Python check that ``distgnn validate``
and ``distgnn run`` enforce without a cluster. Both carry the same message, and
``CEL_RULES`` keeps them side by side.

This module holds the resource (``DistGNNJob``, ``DistGNNJobSpec``), its cross-section rules and
the parsers; the sections live in ``dataset``, ``roles``, ``training``, ``deployment`` and
``status`` and are re-exported here, so that ``distgnn_api.spec`` names the whole API.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from distgnn_api.base_model import Model as Model
from distgnn_api.base_model import OmitsUnset
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.core_types import ResourceRequirements as ResourceRequirements
from distgnn_api.dataset import VOLUME_PATH_MESSAGE as VOLUME_PATH_MESSAGE
from distgnn_api.dataset import VOLUME_PATH_PATTERN as VOLUME_PATH_PATTERN
from distgnn_api.dataset import DatasetSpec as DatasetSpec
from distgnn_api.dataset import OgbDataset as OgbDataset
from distgnn_api.dataset import PygDataset as PygDataset
from distgnn_api.dataset import SyntheticDataset as SyntheticDataset
from distgnn_api.dataset import VolumePath as VolumePath
from distgnn_api.deployment import AccessMode as AccessMode
from distgnn_api.deployment import CleanPodPolicy as CleanPodPolicy
from distgnn_api.deployment import ImagesSpec as ImagesSpec
from distgnn_api.deployment import NetworkPolicySpec as NetworkPolicySpec
from distgnn_api.deployment import PullPolicy as PullPolicy
from distgnn_api.deployment import RetentionPolicy as RetentionPolicy
from distgnn_api.deployment import RunPolicy as RunPolicy
from distgnn_api.deployment import SchedulingSpec as SchedulingSpec
from distgnn_api.deployment import StorageSpec as StorageSpec
from distgnn_api.hetero import HeteroDataset, SyntheticMagDataset
from distgnn_api.hetero_rules import JOB_RULES as _HETERO_JOB_RULES
from distgnn_api.kube import QUANTITY_PATTERN as QUANTITY_PATTERN
from distgnn_api.kube import Dns1123Subdomain
from distgnn_api.link import (
    EdgeSplitSpec,
    LinkEvaluationSpec,
    LinkPrediction,
    Task,
)
from distgnn_api.link_rules import JOB_RULES as _LINK_JOB_RULES
from distgnn_api.ports import RESERVED_PORTS
from distgnn_api.roles import OutOfCore as OutOfCore
from distgnn_api.roles import PartitionAlgorithm as PartitionAlgorithm
from distgnn_api.roles import PartitionSpec as PartitionSpec
from distgnn_api.roles import ReplicateTopology as ReplicateTopology
from distgnn_api.roles import SamplersSpec as SamplersSpec
from distgnn_api.roles import TrainersSpec as TrainersSpec
from distgnn_api.spec_errors import SpecError as SpecError
from distgnn_api.spec_errors import explain, strict_json
from distgnn_api.status import TERMINAL_PHASES as TERMINAL_PHASES
from distgnn_api.status import Condition as Condition
from distgnn_api.status import DistGNNJobStatus as DistGNNJobStatus
from distgnn_api.status import KueueStatus as KueueStatus
from distgnn_api.status import PartitionStatus as PartitionStatus
from distgnn_api.status import Phase as Phase
from distgnn_api.status import Progress as Progress
from distgnn_api.training import Arch as Arch
from distgnn_api.training import EvaluationKind as EvaluationKind
from distgnn_api.training import EvaluationSpec as EvaluationSpec
from distgnn_api.training import ModelSpec as ModelSpec
from distgnn_api.training import TrainingSpec as TrainingSpec

GROUP = "distgnn.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DistGNNJob"
PLURAL = "distgnnjobs"
SINGULAR = "distgnnjob"
SHORT_NAMES = ("dgj",)

# The longest job name: "<job>-sampler" must stay a valid StatefulSet name whose
# controller-revision-hash label value ("<sts>-<10 chars>") fits in 63 characters.
MAX_JOB_NAME_LENGTH = 44

# The job name: a DNS-1035 label (its headless Service needs one): lower-case letters, digits
# and '-', starting with a letter; no dots.
JOB_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"

# --------------------------------------------------------------------------- job


def _holders(spec: DistGNNJobSpec) -> int:
    return spec.samplers.replicas if spec.samplers.replicas > 0 else spec.trainers.replicas


class DistGNNJobSpec(OmitsUnset):
    """Desired state of a distributed GNN training job."""

    dataset: DatasetSpec
    """The graph to train on."""
    task: Task = Task.node_classification
    """nodeClassification (labels of nodes) or linkPrediction (ranking of held-out edges; needs linkPrediction)."""
    link_prediction: LinkPrediction | None = None
    """The supervised edges, their split, negatives, ranking evaluation and decoder (task linkPrediction only)."""
    partition: PartitionSpec = Field(default_factory=PartitionSpec)
    """How the graph is partitioned."""
    samplers: SamplersSpec = Field(default_factory=SamplersSpec)
    """Sampler servers (replicas 0 for worker mode)."""
    trainers: TrainersSpec = Field(default_factory=TrainersSpec)
    """DDP trainers."""
    model: ModelSpec = Field(default_factory=ModelSpec)
    """The GNN."""
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    """The optimisation loop."""
    storage: StorageSpec = Field(default_factory=StorageSpec)
    """The shared volume."""
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    """Restarts, deadline, TTL, suspension and pod cleanup."""
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    """Placement and queueing metadata."""
    images: ImagesSpec = Field(default_factory=ImagesSpec)
    """Container images."""
    metrics_port: int = Field(default=9400, ge=1024, le=65535)
    """Port of the Prometheus endpoint on every pod."""
    service_account_name: Dns1123Subdomain | None = None
    """ServiceAccount of the job's pods; unset uses the namespace default."""
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)
    """Network isolation of the job's pods."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "!has(self.partition.numPartitions) || self.partition.numPartitions % "
            "(self.samplers.replicas > 0 ? self.samplers.replicas : self.trainers.replicas) == 0",
            "numPartitions must be a multiple of samplers.replicas (or of trainers.replicas "
            "when samplers.replicas is 0), so that each holder owns the same number of partitions",
            ".partition.numPartitions",
            lambda s: (
                s.partition.num_partitions is None or s.partition.num_partitions % _holders(s) == 0
            ),
        ),
        _cel(
            "!self.training.bf16 || self.trainers.gpusPerPod > 0",
            "bf16 autocast needs GPUs: set trainers.gpusPerPod to 1 or more, or bf16 to false",
            ".training.bf16",
            lambda s: not s.training.bf16 or s.trainers.gpus_per_pod > 0,
        ),
        _cel(
            "self.model.arch != 'gat' || self.model.hiddenChannels % self.model.heads == 0",
            "hiddenChannels must be divisible by heads for gat",
            ".model.heads",
            lambda s: s.model.arch != Arch.gat or s.model.hidden_channels % s.model.heads == 0,
        ),
        _cel(
            f"!(self.metricsPort in {list(RESERVED_PORTS)!r})",
            f"metricsPort must differ from the workload's fixed ports {list(RESERVED_PORTS)!r} "
            "(torch RPC and the DDP store)",
            ".metricsPort",
            lambda s: s.metrics_port not in RESERVED_PORTS,
        ),
        _cel(
            "!has(self.storage.claimName) || !has(self.storage.storageClassName)",
            "storageClassName applies to a created claim only; remove it or claimName",
            ".storage.storageClassName",
            lambda s: s.storage.claim_name is None or s.storage.storage_class_name is None,
        ),
        _cel(
            "self.partition.outOfCore != 'always' || self.partition.algorithm == 'random' || "
            "self.partition.metisSampleEdges > 0",
            "the out-of-core partitioner runs METIS on a sample only: with outOfCore always and "
            "algorithm metis, set partition.metisSampleEdges (e.g. 16000000), or set "
            "partition.algorithm to random (or outOfCore to auto)",
            ".partition.outOfCore",
            lambda s: (
                s.partition.out_of_core != OutOfCore.always
                or s.partition.algorithm == PartitionAlgorithm.random
                or s.partition.metis_sample_edges > 0
            ),
        ),
        _cel(
            "self.partition.metisSampleEdges == 0 || "
            "(self.partition.algorithm == 'metis' && self.partition.metisSampleEdges >= 10000)",
            "metisSampleEdges selects METIS on a sampled subgraph out of core: it needs "
            "partition.algorithm metis and at least 10000 edges (or 0 for random assignment)",
            ".partition.metisSampleEdges",
            lambda s: (
                s.partition.metis_sample_edges == 0
                or (
                    s.partition.algorithm == PartitionAlgorithm.metis
                    and s.partition.metis_sample_edges >= 10_000
                )
            ),
        ),
        _cel(
            "self.partition.outOfCore != 'always' || has(self.dataset.synthetic) || "
            "(has(self.dataset.ogb) && !has(self.dataset.hetero))",
            "the out-of-core partitioner streams a homogeneous synthetic or ogb dataset: with "
            "outOfCore always, use dataset.synthetic or dataset.ogb without hetero (or set "
            "outOfCore to auto)",
            ".partition.outOfCore",
            lambda s: (
                s.partition.out_of_core != OutOfCore.always
                or s.dataset.synthetic is not None
                or (s.dataset.ogb is not None and s.dataset.hetero is None)
            ),
        ),
        *_HETERO_JOB_RULES,
        *_LINK_JOB_RULES,
    )
    _omitted_when_unset = ("link_prediction",)
    _omitted_when_default = ("task",)

    @property
    def is_link_prediction(self) -> bool:
        """True for a link-prediction job (its linkPrediction section is then set)."""
        return self.task == Task.link_prediction

    @property
    def num_partitions(self) -> int:
        """The effective number of partitions."""
        return self.partition.num_partitions or _holders(self)

    @property
    def worker_mode(self) -> bool:
        """True when trainers sample their own partitions (no sampler servers)."""
        return self.samplers.replicas == 0

    @property
    def num_holders(self) -> int:
        """Pods that hold partitions: the samplers, or the trainers in worker mode."""
        return _holders(self)


# --------------------------------------------------------------------------- resource


class ObjectMeta(Model):
    """The part of metadata a job file carries."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1, max_length=MAX_JOB_NAME_LENGTH, pattern=JOB_NAME_PATTERN)
    """Job name: a DNS-1035 label of at most 44 characters (starts with a letter, no dots)."""
    namespace: str | None = None
    """Namespace."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations."""
    uid: str | None = None
    """UID assigned by the API server."""


class DistGNNJob(Model):
    """A DistGNNJob resource as written in a file or read from the API server."""

    api_version: Literal["distgnn.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["DistGNNJob"]
    metadata: ObjectMeta
    spec: DistGNNJobSpec
    status: DistGNNJobStatus | None = None


# --------------------------------------------------------------------------- parsing


def parse_spec(data: Any) -> DistGNNJobSpec:
    """Parse a job spec (the value of .spec), raising SpecError with field paths."""
    try:
        return DistGNNJobSpec.model_validate_json(strict_json(data), strict=True)
    except ValidationError as err:
        raise explain(err, "spec") from None


def parse_job(data: Any) -> DistGNNJob:
    """Parse a whole DistGNNJob document, raising SpecError with field paths."""
    try:
        return DistGNNJob.model_validate_json(strict_json(data), strict=True)
    except ValidationError as err:
        raise explain(err, "") from None


CEL_RULES: tuple[tuple[type[BaseModel], tuple[CelRule, ...]], ...] = (
    (SyntheticDataset, SyntheticDataset._rules),
    (SyntheticMagDataset, SyntheticMagDataset._rules),
    (HeteroDataset, HeteroDataset._rules),
    (EdgeSplitSpec, EdgeSplitSpec._rules),
    (LinkEvaluationSpec, LinkEvaluationSpec._rules),
    (LinkPrediction, LinkPrediction._rules),
    (DatasetSpec, DatasetSpec._rules),
    (ModelSpec, ModelSpec._rules),
    (NetworkPolicySpec, NetworkPolicySpec._rules),
    (SchedulingSpec, SchedulingSpec._rules),
    (DistGNNJobSpec, DistGNNJobSpec._rules),
)
"""Every model with cross-field rules, for the CRD generator and its tests."""
