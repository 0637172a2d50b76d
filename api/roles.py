"""The partition, sampler and trainer sections of a DistGNNJob: how the graph is split and
how many pods of each role serve and train on it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from distgnn_api.base_model import Model
from distgnn_api.core_types import ResourceRequirements
from distgnn_api.kube import AutoOrQuantity

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
    feature_memory: AutoOrQuantity | None = None
    """GPU memory the feature table of each holder (a sampler; a trainer in worker mode) may take, e.g. 8Gi: the hottest rows (by pre-sampled hotness) go there and the rest stay in pinned host memory, which the GPU reads in place (UVA); auto takes what the card has free less what training needs; unset keeps the whole table on the GPU."""
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
    embedding_memory: AutoOrQuantity | None = None
    """GPU memory the learnable embeddings of featureless node types (each process's shard of every table, with its optimizer state) may take, e.g. 4Gi: the tables that do not fit, the largest first, stay in pinned host memory, which the GPU reads and updates in place (UVA); auto takes what the card has free less what training needs; unset keeps every table on the GPU."""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    """Resources of each trainer container."""
