"""The DistGNNJob API: pydantic models of the custom resource's spec and status.

These models are the single source of truth for the ``DistGNNJob`` resource. The CRD's
OpenAPI schema (descriptions, defaults, enums, bounds and the CEL rules in
``x-kubernetes-validations``) is generated from them, the operator parses every object
through them at handler entry, and the workload reads the job config through them.

Cross-field rules are written twice on purpose: once as a CEL expression that the API
server enforces at ``kubectl apply``, and once as a Python check that ``distgnn validate``
and ``distgnn run`` enforce without a cluster. Both carry the same message, and
``CEL_RULES`` keeps them side by side.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from distgnn_api.affinity import Affinity
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.cel import enforce as _enforce
from distgnn_api.cel import rules_extra as _rules_extra
from distgnn_api.core_types import ResourceRequirements as ResourceRequirements
from distgnn_api.core_types import Toleration
from distgnn_api.hetero import DATASET_RULES as _HETERO_DATASET_RULES
from distgnn_api.hetero import (
    DEFAULT_EMBEDDING_DIM,
    EdgeFanouts,
    HeteroDataset,
    SyntheticMagDataset,
)
from distgnn_api.hetero import JOB_RULES as _HETERO_JOB_RULES
from distgnn_api.hetero import MODEL_RULES as _HETERO_MODEL_RULES
from distgnn_api.kube import QUANTITY_PATTERN as QUANTITY_PATTERN
from distgnn_api.kube import (
    Annotations,
    CoreModel,
    Dns1123Subdomain,
    Image,
    Labels,
    PositiveQuantity,
)
from distgnn_api.link import (
    EdgeSplitSpec,
    LinkEvaluationSpec,
    LinkPrediction,
    SyntheticLinkDataset,
    Task,
)
from distgnn_api.link_rules import DATASET_RULES as _LINK_DATASET_RULES
from distgnn_api.link_rules import JOB_RULES as _LINK_JOB_RULES
from distgnn_api.mag_shape import MAG_TARGET_NODE_TYPE
from distgnn_api.ports import RESERVED_PORTS

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
# A path on the shared volume: relative, no "..", no leading slash.
VOLUME_PATH_PATTERN = r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
_VOLUME_PATH_RE = re.compile(VOLUME_PATH_PATTERN)


def _check_volume_path(value: str) -> str:
    if not _VOLUME_PATH_RE.fullmatch(value) or any(p == ".." for p in value.split("/")):
        raise ValueError(f"{value!r} {VOLUME_PATH_MESSAGE}")
    return value


VOLUME_PATH_MESSAGE = (
    "must be a relative path on the shared volume; write e.g. 'datasets/ogbn-products' "
    "(no leading '/', no '..')"
)
VolumePath = Annotated[
    str,
    AfterValidator(_check_volume_path),
    Field(
        min_length=1,
        max_length=1024,
        json_schema_extra={
            "pattern": VOLUME_PATH_PATTERN,
            "x-kubernetes-validations": [
                {
                    "rule": "self != '..' && !self.startsWith('../') && !self.endsWith('/..') "
                    "&& !self.contains('/../')",
                    "message": VOLUME_PATH_MESSAGE,
                }
            ],
        },
    ),
]


class Model(CoreModel):
    """Base of every API model: camelCase on the wire, immutable, no unknown fields."""


class _OmitsUnset(Model):
    """A model whose fields in ``_omitted_when_unset`` are not written while they are None.

    The fields added for heterogeneous graphs are listed there, so that a homogeneous job's
    config (``job.json``) is byte for byte what it was before they existed.
    """

    _omitted_when_unset: ClassVar[tuple[str, ...]] = ()
    _omitted_when_default: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            fields = type(self).model_fields
            for name in (*self._omitted_when_unset, *self._omitted_when_default):
                value = getattr(self, name)
                if value is None or (
                    name in self._omitted_when_default and value == fields[name].default
                ):
                    alias = fields[name].alias
                    data.pop(alias if info.by_alias and alias else name, None)
        return data


# --------------------------------------------------------------------------- dataset


class SyntheticDataset(Model):
    """A generated graph with learnable labels: communities with homophily and a feature signal.

    The defaults are shaped like ogbn-products.
    """

    num_nodes: int = Field(default=2_449_029, ge=2, le=2_000_000_000)
    """Number of nodes."""
    num_edges: int = Field(default=61_859_140, ge=1, le=50_000_000_000)
    """Number of undirected edges; the stored graph holds each in both directions."""
    num_features: int = Field(default=100, ge=1, le=4096)
    """Node feature dimension."""
    num_classes: int = Field(default=47, ge=2, le=10_000)
    """Number of label classes; each class is one community."""
    homophily: float = Field(default=0.8, ge=0.0, le=1.0)
    """Share of edges whose endpoints are in the same community."""
    feature_noise: float = Field(default=1.0, ge=0.0, le=100.0)
    """Standard deviation of the Gaussian noise added to each class's feature centroid."""
    train_fraction: float = Field(default=0.08, gt=0.0, lt=1.0)
    """Share of nodes in the training split."""
    val_fraction: float = Field(default=0.02, ge=0.0, lt=1.0)
    """Share of nodes in the validation split; the rest is the test split."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of the generator; the same seed gives the same graph."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "self.trainFraction + self.valFraction < 1.0",
            "trainFraction + valFraction must be below 1 to leave a test split",
            ".trainFraction",
            lambda s: s.train_fraction + s.val_fraction < 1.0,
        ),
        _cel(
            "self.numEdges <= self.numNodes * (self.numNodes - 1) / 2",
            "numEdges exceeds what numNodes can hold (numNodes*(numNodes-1)/2 undirected edges); "
            "set numEdges together with numNodes",
            ".numEdges",
            lambda s: s.num_edges <= s.num_nodes * (s.num_nodes - 1) // 2,
        ),
    )
    model_config = ConfigDict(json_schema_extra=_rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        _enforce(self, self._rules)
        return self


class OgbDataset(Model):
    """An OGB node-property dataset in its raw format, on the shared volume."""

    path: VolumePath
    """Dataset directory relative to the volume, holding raw/ and split/."""
    split_scheme: str | None = Field(default=None, min_length=1, max_length=128)
    """Folder under split/ (e.g. sales_ranking); unset means the only folder there."""


class PygDataset(Model):
    """A torch_geometric.data.Data saved with torch.save on the shared volume."""

    path: VolumePath
    """File path relative to the volume. It needs x, y, edge_index and train/val/test masks."""


class DatasetSpec(_OmitsUnset):
    """The graph to train on: set exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg.

    syntheticMag, or hetero beside ogb or pyg, makes the graph heterogeneous (node and edge
    types); synthetic, or ogb or pyg alone, is a homogeneous graph.
    """

    synthetic: SyntheticDataset | None = None
    """A generated homogeneous graph."""
    ogb: OgbDataset | None = None
    """OGB raw files on the volume (ogbn-mag's layout when hetero is set)."""
    pyg: PygDataset | None = None
    """A PyG file on the volume: a Data, or a HeteroData when hetero is set."""
    synthetic_mag: SyntheticMagDataset | None = None
    """A generated heterogeneous graph shaped like ogbn-mag."""
    synthetic_link: SyntheticLinkDataset | None = None
    """A generated homogeneous graph shaped like ogbl-citation2, for link prediction."""
    hetero: HeteroDataset | None = None
    """The heterogeneous side of the dataset: target node type, declared types, reverse edges."""

    _omitted_when_unset = ("synthetic_mag", "synthetic_link", "hetero")
    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "[has(self.synthetic), has(self.syntheticMag), has(self.syntheticLink), "
            "has(self.ogb), has(self.pyg)].filter(x, x).size() == 1",
            "set exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg",
            ".synthetic",
            lambda s: (
                sum(
                    x is not None
                    for x in (s.synthetic, s.synthetic_mag, s.synthetic_link, s.ogb, s.pyg)
                )
                == 1
            ),
        ),
        *_HETERO_DATASET_RULES,
        *_LINK_DATASET_RULES,
    )
    model_config = ConfigDict(json_schema_extra=_rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        _enforce(self, self._rules)
        return self

    @property
    def is_hetero(self) -> bool:
        """True for a graph with node and edge types (syntheticMag, or hetero is set)."""
        return self.synthetic_mag is not None or self.hetero is not None

    @property
    def hetero_section(self) -> HeteroDataset | None:
        """The heterogeneous side as it applies, or None for a homogeneous graph: hetero, or
        its defaults for a syntheticMag without it; syntheticMag's target is always paper."""
        if self.synthetic_mag is None:
            return self.hetero
        section = self.hetero or HeteroDataset()
        if section.target_node_type is None:
            section = section.model_copy(update={"target_node_type": MAG_TARGET_NODE_TYPE})
        return section


# --------------------------------------------------------------------------- partition


class PartitionAlgorithm(StrEnum):
    metis = "metis"
    random = "random"


class OutOfCore(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


class PartitionSpec(Model):
    """How the partition Job splits the graph."""

    algorithm: PartitionAlgorithm = PartitionAlgorithm.metis
    """metis (edge-cut minimising, balanced) or random (hash; for graphs too large for METIS)."""
    num_partitions: int | None = Field(default=None, ge=1, le=4096)
    """Number of partitions; unset means one per sampler (or per trainer in worker mode)."""
    balance_train_nodes: bool = True
    """Balance training nodes across partitions (METIS vertex-weight constraint)."""
    balance_edges: bool = True
    """Balance edges across partitions (METIS vertex-weight constraint)."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of the partitioner."""
    out_of_core: OutOfCore = OutOfCore.auto
    """Stream the graph through bounded memory (chunked input, external sort, chunked store): auto does so when the in-memory partitioner would exceed this Job's memory limit, always and never force the choice. Out of core, nodes are assigned at random unless metisSampleEdges is set."""
    metis_sample_edges: int = Field(default=0, ge=0, le=2_000_000_000)
    """Out of core with algorithm metis: METIS partitions the subgraph induced by a random node sample of about this many stored edges (its memory: about 100 bytes each), and the other nodes are streamed into the partitions most of their neighbours are in (5 more passes over the edges); 0 assigns nodes at random out of core. Ignored in memory."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """Resources of the partition Job's container."""


# --------------------------------------------------------------------------- roles


class ReplicateTopology(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


class SamplersSpec(Model):
    """Sampler servers: they hold partitions and serve sampled, feature-complete mini-batches."""

    replicas: int = Field(default=2, ge=0, le=1024)
    """Number of sampler pods; 0 means worker mode, where each trainer samples itself."""
    gpus_per_pod: int = Field(default=0, ge=0, le=16)
    """GPUs per sampler pod (nvidia.com/gpu); 0 samples on CPU."""
    workers: int = Field(default=2, ge=1, le=64)
    """Sampling worker threads per sampler pod."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Mini-batch requests each sampler serves at once."""
    cache_ratio: float = Field(default=0.1, ge=0.0, le=1.0)
    """Share of remote node features kept in the hot-feature cache (by pre-sampled hotness)."""
    replicate_topology: ReplicateTopology = ReplicateTopology.auto
    """Replicate the whole topology on each holder (local sampling, only features move): auto does so when it fits in memory."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """Resources of each sampler container."""


class TrainersSpec(Model):
    """DDP trainers: one process per GPU (or one per pod on CPU)."""

    replicas: int = Field(default=2, ge=1, le=1024)
    """Number of trainer pods."""
    gpus_per_pod: int = Field(default=1, ge=0, le=16)
    """GPUs per trainer pod, one training process each; 0 trains on CPU with gloo."""
    prefetch: int = Field(default=4, ge=1, le=64)
    """Mini-batches fetched ahead of the training step."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """Resources of each trainer container."""


# --------------------------------------------------------------------------- model


class Arch(StrEnum):
    """The GNN: sage, gcn and gat for homogeneous graphs, rsage and rgcn for heterogeneous ones."""

    sage = "sage"
    gcn = "gcn"
    gat = "gat"
    rsage = "rsage"
    """GraphSAGE made relational as PyG's to_hetero does: one SAGEConv per edge type, summed."""
    rgcn = "rgcn"
    """R-GCN (PyG's RGCNConv semantics): one weight per edge type plus a root weight, mean."""


class ModelSpec(_OmitsUnset):
    """The GNN."""

    arch: Arch = Arch.sage
    """sage (GraphSAGE), gcn or gat for a homogeneous graph; rsage (to_hetero(GraphSAGE)) or rgcn (R-GCN) for a heterogeneous one."""
    hidden_channels: int = Field(default=256, ge=1, le=16384)
    """Hidden size of each layer."""
    num_layers: int = Field(default=3, ge=1, le=8)
    """Number of message-passing layers."""
    fanout: list[Annotated[int, Field(ge=1, le=10_000)]] = Field(
        default_factory=lambda: [15, 10, 5], min_length=1, max_length=8
    )
    """Neighbours sampled per node at each layer, first layer first; one entry per layer. In a heterogeneous graph, per edge type, for every edge type edgeFanouts does not list."""
    dropout: float = Field(default=0.5, ge=0.0, lt=1.0)
    """Dropout probability between layers."""
    heads: int = Field(default=4, ge=1, le=64)
    """Attention heads (gat only)."""
    edge_fanouts: EdgeFanouts | None = None
    """Fanouts per edge type of a heterogeneous graph, e.g. {author__writes__paper: [15, 10]}; keys are src__rel__dst (reverses rev_<rel>), one entry per layer; unlisted edge types use fanout."""
    embedding_dim: int | None = Field(default=None, ge=1, le=4096)
    """Size of the learnt embeddings of node types without features (heterogeneous graphs only); unset means 128."""

    _omitted_when_unset = ("edge_fanouts", "embedding_dim")
    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "size(self.fanout) == self.numLayers",
            "fanout must have exactly one entry per layer (numLayers)",
            ".fanout",
            lambda s: len(s.fanout) == s.num_layers,
        ),
        *_HETERO_MODEL_RULES,
    )
    model_config = ConfigDict(json_schema_extra=_rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        _enforce(self, self._rules)
        return self

    @property
    def embedding_size(self) -> int:
        """embeddingDim, or its default."""
        return self.embedding_dim or DEFAULT_EMBEDDING_DIM


class EvaluationKind(StrEnum):
    """How an accuracy figure is computed.

    full: every node's whole in-neighbourhood, layer by layer over the whole graph (what
    PyG's examples and the OGB leaderboards report); sampled: mini-batches whose
    neighbourhoods are sampled at the training fanout (cheaper, and lower).
    """

    full = "full"
    sampled = "sampled"


class EvaluationSpec(Model):
    """Which kind of evaluation gives the validation and test accuracy."""

    test: EvaluationKind = EvaluationKind.full
    """full (full-neighbourhood, layer-wise over all nodes) or sampled (at the training fanout)."""
    validation: EvaluationKind = EvaluationKind.sampled
    """The final validation figure: sampled, or full (a pass over the whole graph); validation during training is sampled."""


class TrainingSpec(Model):
    """The optimisation loop."""

    epochs: int = Field(default=10, ge=1, le=100_000)
    """Number of epochs."""
    batch_size: int = Field(default=1024, ge=1, le=1_048_576)
    """Seed nodes per mini-batch per trainer process."""
    learning_rate: float = Field(default=0.003, gt=0.0, le=10.0)
    """Adam learning rate."""
    weight_decay: float = Field(default=0.0, ge=0.0, le=1.0)
    """Adam weight decay."""
    eval_every: int = Field(default=1, ge=0, le=100_000)
    """Evaluate validation accuracy every this many epochs; 0 evaluates only at the end."""
    checkpoint_every: int = Field(default=1, ge=1, le=100_000)
    """Write a checkpoint every this many epochs."""
    bf16: bool = False
    """Run forward and backward under bf16 autocast (GPU only)."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of model initialisation and shuffling."""
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    """Full-neighbourhood or sampled evaluation, for the test and the validation figures."""


# --------------------------------------------------------------------------- storage


class AccessMode(StrEnum):
    read_write_once = "ReadWriteOnce"
    read_write_many = "ReadWriteMany"
    read_write_once_pod = "ReadWriteOncePod"


class RetentionPolicy(StrEnum):
    retain = "Retain"
    delete = "Delete"


class StorageSpec(Model):
    """The shared volume that holds datasets, partitions, checkpoints and results."""

    claim_name: Dns1123Subdomain | None = None
    """An existing PersistentVolumeClaim to use; unset creates one named <job>-data."""
    storage_class_name: Dns1123Subdomain | None = None
    """StorageClass of the created claim; unset uses the cluster default."""
    size: PositiveQuantity = "50Gi"
    """Size of the created claim."""
    access_modes: list[AccessMode] | None = Field(default=None, min_length=1, max_length=3)
    """Access modes of the created claim; unset means ReadWriteMany when the job has more than one pod."""
    retention_policy: RetentionPolicy = RetentionPolicy.retain
    """What happens to a created claim when the job is deleted: Retain keeps it, Delete removes it."""


# --------------------------------------------------------------------------- policies


class CleanPodPolicy(StrEnum):
    none = "None"
    running = "Running"
    all = "All"


class RunPolicy(Model):
    """Restart, deadline, cleanup and suspension, as in Kubeflow's RunPolicy."""

    backoff_limit: int = Field(default=3, ge=0, le=1000)
    """Gang restarts allowed after a trainer or sampler fails, before the job is Failed."""
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    """Fail the job when it has been active this long."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Delete the job this long after it Succeeded or Failed."""
    suspend: bool = False
    """Suspend the job: its pods are removed, and resuming continues from the last checkpoint."""
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.all
    """Pods to stop when the job finishes: All, Running, or None to keep them for debugging."""


class PullPolicy(StrEnum):
    always = "Always"
    if_not_present = "IfNotPresent"
    never = "Never"


class SchedulingSpec(Model):
    """Placement of every pod of the job, and metadata for queueing systems (Kueue, Volcano)."""

    scheduler_name: Dns1123Subdomain | None = None
    """Scheduler of the pods, e.g. volcano."""
    priority_class_name: Dns1123Subdomain | None = None
    """PriorityClass of the pods."""
    node_selector: Labels = Field(default_factory=dict)
    """Node labels the pods require."""
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    """Tolerations of the pods."""
    affinity: Affinity | None = None
    """Pod affinity (core/v1 Affinity: nodeAffinity, podAffinity, podAntiAffinity)."""
    labels: Labels = Field(default_factory=dict)
    """Extra labels on every child and pod, e.g. kueue.x-k8s.io/queue-name."""
    annotations: Annotations = Field(default_factory=dict)
    """Extra annotations on every pod."""


class ImagesSpec(Model):
    """Container images of the workload."""

    gpu: Image = "ghcr.io/distgnn/workload:0.1.0-cuda"
    """Image for pods that request GPUs."""
    cpu: Image = "ghcr.io/distgnn/workload:0.1.0-cpu"
    """Image for the partition Job and pods without GPUs."""
    pull_policy: PullPolicy = PullPolicy.if_not_present
    """imagePullPolicy of every container."""
    pull_secrets: list[Dns1123Subdomain] = Field(default_factory=list, max_length=64)
    """Names of imagePullSecrets."""


class NetworkPolicySpec(Model):
    """The job's NetworkPolicy: all ports between the job's pods, only metrics from outside."""

    enabled: bool = True
    """Create the NetworkPolicy."""
    monitoring_namespace_selector: Labels = Field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "monitoring"}
    )
    """Labels of the namespaces allowed to scrape the metrics port. Empty ({}) is an explicit choice that admits scrapers from EVERY namespace; allowAllNamespaces must then be true."""
    monitoring_pod_selector: Labels = Field(default_factory=dict)
    """Labels of the pods in those namespaces allowed to scrape; empty allows all of them."""
    allow_all_namespaces: bool = False
    """Must be true for an empty monitoringNamespaceSelector, which opens the metrics port to pods of every namespace."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "size(self.monitoringNamespaceSelector) > 0 || self.allowAllNamespaces",
            "an empty monitoringNamespaceSelector admits every namespace to the metrics port; "
            "name the monitoring namespace's labels, or set allowAllNamespaces to true",
            ".monitoringNamespaceSelector",
            lambda s: bool(s.monitoring_namespace_selector) or s.allow_all_namespaces,
        ),
    )
    model_config = ConfigDict(json_schema_extra=_rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        _enforce(self, self._rules)
        return self


# --------------------------------------------------------------------------- job


def _holders(spec: DistGNNJobSpec) -> int:
    return spec.samplers.replicas if spec.samplers.replicas > 0 else spec.trainers.replicas


class DistGNNJobSpec(_OmitsUnset):
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
    model_config = ConfigDict(json_schema_extra=_rules_extra(_rules))

    @model_validator(mode="after")
    def _validate(self) -> Self:
        _enforce(self, self._rules)
        return self

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


# --------------------------------------------------------------------------- status


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


class SpecError(ValueError):
    """An invalid job: each entry names a field path and says how to fix it."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in errors))


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _explain(err: ValidationError, prefix: str) -> SpecError:
    items: list[tuple[str, str]] = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        path = _format_loc(loc)
        msg = str(e["msg"]).removeprefix("Value error, ")
        # A rule's message already names its field: "<path>: <message>".
        if ": " in msg and e["type"] == "value_error":
            sub, _, rest = msg.partition(": ")
            path = ".".join(x for x in (path, sub) if x)
            msg = rest
        items.append((".".join(x for x in (prefix, path) if x), msg))
    return SpecError(items)


def _strict_json(data: Any) -> str:
    """A document as JSON, read in strict mode: like the API server, no '5' for 5, no 'yes'
    for true."""
    try:
        return json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise SpecError([("", f"not a JSON document: {err}")]) from None


def parse_spec(data: Any) -> DistGNNJobSpec:
    """Parse a job spec (the value of .spec), raising SpecError with field paths."""
    try:
        return DistGNNJobSpec.model_validate_json(_strict_json(data), strict=True)
    except ValidationError as err:
        raise _explain(err, "spec") from None


def parse_job(data: Any) -> DistGNNJob:
    """Parse a whole DistGNNJob document, raising SpecError with field paths."""
    try:
        return DistGNNJob.model_validate_json(_strict_json(data), strict=True)
    except ValidationError as err:
        raise _explain(err, "") from None


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
    (DistGNNJobSpec, DistGNNJobSpec._rules),
)
"""Every model with cross-field rules, for the CRD generator and its tests."""
