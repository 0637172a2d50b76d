"""Link prediction in the spec: the task field's values, the ``linkPrediction`` section, the
citation2-shaped generator's options and their admission rules
(:mod:`distgnn_api.link_rules` holds the rules that read the whole job).

A job predicts links when ``task`` is ``linkPrediction``; its ``linkPrediction`` section says
which edges are supervised (``edgeType`` in a heterogeneous graph), how they are split into
train, valid and test (fractions drawn with ``partition.seed``, or the dataset's own split),
which reverses message passing may not see, the training negatives, the ranking evaluation
(MRR and Hits@K against fixed negatives per positive, as the OGB link benchmarks do) and the
decoder. The partition Job writes the split into the store once, so every process agrees.

What admission can check depends on where the graph comes from. The generators' sizes and
types are fixed by their options, so CEL checks ``negatives: all`` against the node count and
``edgeType`` against syntheticMag's relations; OGB and PyG files are checked when they load
(:func:`check_all_negatives`, whose errors name the spec field as admission's do).

Models here derive from :class:`~distgnn_api.base_model.CoreModel` (camelCase on the wire,
immutable, no unknown fields); :mod:`distgnn_api.spec` imports them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Final, Literal

from pydantic import AfterValidator, Field

from distgnn_api.base_model import CoreModel
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.edge_types import KEY_SEPARATOR
from distgnn_api.hetero import EdgeTypeKey

# --------------------------------------------------------------------------- ogbl-citation2

CITATION2_NODES: Final = 2_927_963
CITATION2_EDGES: Final = 30_561_187
"""ogbl-citation2's papers and (directed) citations; the generator's size at scale 1.0."""
CITATION2_FEATURES: Final = 128
SYNTHETIC_LINK_GENERATOR: Final = 2
"""How ``syntheticLink`` draws its graph (1: one stream, one thread; 2: a stream per chunk,
all cores). Part of the store's content key: a store drawn another way is never reused."""
LINK_SPLIT_VERSION: Final = 2
"""How the partition Job draws a link split (2: evaluation negatives in blocks of positives,
one stream each). Part of the store's content key."""
MIN_LINK_SCALE: Final = 0.0001
"""293 nodes and 3,056 edges: the smallest graph that still splits into three edge sets."""

ALL_NEGATIVES_MAX_NODES: Final = 100_000
"""``evaluation.negatives: all`` ranks each positive against every node: a graph larger than
this would take an [E, N] score matrix per split."""
DEFAULT_SPLIT_FRACTION: Final = 0.05
"""valid and test each take this share of the supervised edges when unset."""
MAX_EVAL_NEGATIVES: Final = 100_000
MAX_HITS_AT: Final = 16
MAX_POSITIVES_PER_EPOCH: Final = 10_000_000_000


def link_scaled_count(full: int, scale: float) -> int:
    """A full-scale count at ``scale``: rounded, and at least 1."""
    return max(1, round(full * scale))


# --------------------------------------------------------------------------- enums


class Task(StrEnum):
    """What a job learns: node labels (the default) or links."""

    node_classification = "nodeClassification"
    link_prediction = "linkPrediction"


class NegativeKind(StrEnum):
    """Training negatives: uniform pairs, or each positive's destination replaced."""

    uniform = "uniform"
    """Source and destination drawn uniformly from the nodes (PyG's ``neg_sampling='binary'``)."""
    corrupt_destination = "corruptDestination"
    """The positive's source kept, its destination drawn uniformly (DGL's uniform sampler)."""


class Decoder(StrEnum):
    """How a pair of node embeddings becomes a score."""

    dot = "dot"
    mlp = "mlp"


# --------------------------------------------------------------------------- models


class SyntheticLinkDataset(CoreModel):
    """A generated homogeneous graph shaped like ogbl-citation2, whose links are learnable.

    At scale 1.0 it has ogbl-citation2's 2,927,963 nodes, 30,561,187 directed edges and 128
    features; counts scale linearly (rounded). Nodes belong to latent communities that the
    features reveal through noise, and edges prefer nodes of the same community and of high
    popularity, so a trained encoder ranks true links well above random ones, but not all.
    """

    scale: float = Field(default=1.0, ge=MIN_LINK_SCALE, le=10.0)
    """Size relative to ogbl-citation2: 1.0 is full size, 0.01 a hundredth of its nodes and edges."""
    num_features: int = Field(default=CITATION2_FEATURES, ge=1, le=4096)
    """Node feature dimension."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of the generator; the same seed gives the same graph."""

    @property
    def num_nodes(self) -> int:
        return link_scaled_count(CITATION2_NODES, self.scale)

    @property
    def num_edges(self) -> int:
        return link_scaled_count(CITATION2_EDGES, self.scale)


class EdgeSplitSpec(CoreModel):
    """How the supervised edges split into train, valid and test: fractions, or the dataset's own."""

    valid: float | None = Field(default=None, gt=0.0, lt=1.0)
    """Share of the supervised edges held out for validation; unset means 0.05."""
    test: float | None = Field(default=None, gt=0.0, lt=1.0)
    """Share of the supervised edges held out for the test; unset means 0.05."""
    from_dataset: bool = False
    """Use the dataset's own split (split/<scheme>/{train,valid,test}.pt of an OGB link dataset) instead of fractions."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "!self.fromDataset || (!has(self.valid) && !has(self.test))",
            "fromDataset takes the dataset's own split: remove valid and test, or set "
            "fromDataset to false",
            ".fromDataset",
            lambda s: not s.from_dataset or (s.valid is None and s.test is None),
        ),
        _cel(
            f"(has(self.valid) ? self.valid : {DEFAULT_SPLIT_FRACTION}) + "
            f"(has(self.test) ? self.test : {DEFAULT_SPLIT_FRACTION}) < 1.0",
            f"valid + test must be below 1 to leave training edges (each is "
            f"{DEFAULT_SPLIT_FRACTION} when unset)",
            ".valid",
            lambda s: s.valid_fraction + s.test_fraction < 1.0,
        ),
    )

    @property
    def valid_fraction(self) -> float:
        return DEFAULT_SPLIT_FRACTION if self.valid is None else self.valid

    @property
    def test_fraction(self) -> float:
        return DEFAULT_SPLIT_FRACTION if self.test is None else self.test


class NegativeSamplingSpec(CoreModel):
    """Negatives of the training loss."""

    per_positive: int = Field(default=1, ge=1, le=1000)
    """Negative pairs per positive edge in each training batch."""
    kind: NegativeKind = NegativeKind.uniform
    """uniform (both endpoints random) or corruptDestination (the positive's source, a random destination)."""


def _check_hits_unique(values: list[int]) -> list[int]:
    seen: set[int] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"lists {value} twice; name each K once")
        seen.add(value)
    return values


HitsAt = Annotated[
    list[Annotated[int, Field(ge=1, le=MAX_EVAL_NEGATIVES)]],
    AfterValidator(_check_hits_unique),
    Field(
        min_length=1, max_length=MAX_HITS_AT, json_schema_extra={"x-kubernetes-list-type": "set"}
    ),
]
NEGATIVES_MESSAGE: Final = (
    f"must be a count of negatives per positive from 1 to {MAX_EVAL_NEGATIVES}, or 'all'"
)


def _check_negatives(value: int | str) -> int | str:
    if isinstance(value, int) and not 1 <= value <= MAX_EVAL_NEGATIVES:
        raise ValueError(f"{value} {NEGATIVES_MESSAGE}")
    return value


EvalNegatives = Annotated[
    int | Literal["all"],
    AfterValidator(_check_negatives),
    Field(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"type(self) == string ? self == 'all' : "
                    f"(self >= 1 && self <= {MAX_EVAL_NEGATIVES})",
                    "message": NEGATIVES_MESSAGE,
                }
            ]
        }
    ),
]


class LinkEvaluationSpec(CoreModel):
    """The ranking evaluation of valid and test edges, as the OGB link benchmarks compute it."""

    negatives: EvalNegatives = 1000
    """Negatives per positive, drawn once and kept in the store (ogbl-citation2 uses 1000); or 'all' to rank against every node (small graphs only)."""
    hits_at: HitsAt = Field(default_factory=lambda: [10, 50, 100])
    """The K of each Hits@K reported; MRR is always reported."""
    max_positives: int | None = Field(default=None, ge=1, le=1_000_000_000)
    """At most this many positives of each split are evaluated (a fixed subset); unset evaluates all."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "type(self.negatives) == string || self.hitsAt.all(k, k <= self.negatives)",
            "every hitsAt K must be at most negatives: with N negatives a positive ranks at "
            "most N+1, so Hits@K for K > N is always 1",
            ".hitsAt",
            lambda s: isinstance(s.negatives, str) or all(k <= s.negatives for k in s.hits_at),
        ),
    )

    @property
    def all_negatives(self) -> bool:
        """True when each positive ranks against every node."""
        return self.negatives == "all"


class LinkPrediction(CoreModel):
    """What a link-prediction job supervises, how it splits, samples negatives, ranks and decodes."""

    edge_type: EdgeTypeKey | None = None
    """The supervised edge type, src__rel__dst, e.g. author__writes__paper (heterogeneous datasets only, required there)."""
    split: EdgeSplitSpec = Field(default_factory=EdgeSplitSpec)
    """Fractions of the supervised edges held out for valid and test, or fromDataset."""
    exclude_reverse: bool = True
    """Keep the reverse of each valid and test edge (in reverseEdgeType) out of message passing as well; a homogeneous graph's undirected topology always drops both directions."""
    reverse_edge_type: EdgeTypeKey | None = None
    """The reverse relation of edgeType (heterogeneous only); unset means dst__rev_<rel>__src, as ToUndirected names it."""
    negatives: NegativeSamplingSpec = Field(default_factory=NegativeSamplingSpec)
    """Training negatives."""
    evaluation: LinkEvaluationSpec = Field(default_factory=LinkEvaluationSpec)
    """MRR and Hits@K against fixed negatives per positive."""
    decoder: Decoder = Decoder.dot
    """dot (the embeddings' inner product) or mlp (an MLP over the pair's elementwise product)."""
    positives_per_epoch: int | None = Field(default=None, ge=1, le=MAX_POSITIVES_PER_EPOCH)
    """Train each epoch on a fresh random subset of this many training positives (all ranks agree on it); unset trains on all of them every epoch."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "!has(self.reverseEdgeType) || has(self.edgeType)",
            "reverseEdgeType names the reverse of edgeType in a heterogeneous graph; set "
            "edgeType, or remove reverseEdgeType for a homogeneous graph",
            ".reverseEdgeType",
            lambda s: s.reverse_edge_type is None or s.edge_type is not None,
        ),
        _cel(
            "!has(self.reverseEdgeType) || !has(self.edgeType) || "
            "self.reverseEdgeType != self.edgeType",
            "reverseEdgeType must differ from edgeType; a relation within one node type "
            "has no separate reverse: remove reverseEdgeType",
            ".reverseEdgeType",
            lambda s: s.reverse_edge_type is None or s.reverse_edge_type != s.edge_type,
        ),
        _cel(
            "!has(self.reverseEdgeType) || !has(self.edgeType) || "
            f"(self.reverseEdgeType.split('{KEY_SEPARATOR}')[0] == "
            f"self.edgeType.split('{KEY_SEPARATOR}')[2] && "
            f"self.reverseEdgeType.split('{KEY_SEPARATOR}')[2] == "
            f"self.edgeType.split('{KEY_SEPARATOR}')[0])",
            "reverseEdgeType must lead back from edgeType's destination type to its source "
            "type (dst__<rel>__src), e.g. paper__rev_writes__author for author__writes__paper",
            ".reverseEdgeType",
            lambda s: _leads_back(s.edge_type, s.reverse_edge_type),
        ),
    )


def _leads_back(edge_type: str | None, reverse: str | None) -> bool:
    """Whether ``reverse`` goes from ``edge_type``'s destination type to its source type."""
    if edge_type is None or reverse is None:
        return True
    fwd, rev = edge_type.split(KEY_SEPARATOR), reverse.split(KEY_SEPARATOR)
    return len(fwd) == len(rev) == 3 and rev[0] == fwd[2] and rev[2] == fwd[0]


def check_all_negatives(
    num_nodes: int, field: str = "spec.linkPrediction.evaluation.negatives"
) -> None:
    """Raise ValueError naming the field when 'all' negatives meet a graph larger than the
    limit; for datasets whose size only their files tell (ogb, pyg)."""
    if num_nodes > ALL_NEGATIVES_MAX_NODES:
        raise ValueError(
            f"{field}: 'all' ranks each positive against every node, and this graph has "
            f"{num_nodes:,} (at most {ALL_NEGATIVES_MAX_NODES:,}); set a count such as 1000"
        )
