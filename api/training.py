"""The model and training sections of a DistGNNJob: the GNN, the optimisation loop and how
accuracy is evaluated."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field

from distgnn_api.base_model import Model, OmitsUnset
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.hetero import DEFAULT_EMBEDDING_DIM, EdgeFanouts
from distgnn_api.hetero_rules import MODEL_RULES as _HETERO_MODEL_RULES

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


class ModelSpec(OmitsUnset):
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
