"""Heterogeneous graphs in the spec: the typed dataset section, the MAG-shaped generator's
options and per-edge-type fanouts (their admission rules are in :mod:`distgnn_api.hetero_rules`).

A dataset is heterogeneous when it is ``dataset.syntheticMag`` (a generated graph shaped like
ogbn-mag) or when it carries ``dataset.hetero`` (with ``ogb`` or ``pyg`` files). Edge types are
written ``src__rel__dst`` everywhere (:mod:`distgnn_api.edge_types`); reverses are
``rev_<rel>``, as ``torch_geometric.transforms.ToUndirected`` names them.

What admission can check depends on where the types come from. The generator's types are
fixed, so the CRD's CEL rules check fanout keys and the target type against them. For ``ogb``
and ``pyg`` files the types are in the files: admission checks fanout keys only against the
``nodeTypes``/``edgeTypes`` a user declares, and the workload checks everything against the
files when it loads them (:mod:`distgnn_api.hetero_load`; errors name the spec field, as
admission's do). :mod:`distgnn_api.mag_shape` holds ogbn-mag's shape.

Models here derive from :class:`~distgnn_api.base_model.CoreModel`, as ``distgnn_api.spec``'s do
(camelCase on the wire, immutable, no unknown fields); the spec module imports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar, Final

from pydantic import AfterValidator, Field

from distgnn_api.base_model import CoreModel
from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.edge_types import (
    KEY_SEPARATOR,
    MAX_NAME_LENGTH,
    REVERSE_PREFIX,
    STRICT_KEY_PATTERN,
    STRICT_NAME_PATTERN,
    EdgeType,
    is_type_name,
    parse_edge_type_key,
)
from distgnn_api.mag_shape import (
    MAG_NODE_TYPES,
    MAG_NUM_CLASSES,
    MAG_PAPERS,
    MAG_RELATIONS,
    MIN_MAG_SCALE,
    scaled_count,
)

DEFAULT_EMBEDDING_DIM: Final = 128
"""Size of the learnt embeddings of featureless node types when model.embeddingDim is unset."""

# --------------------------------------------------------------------------- field types


def _check_type_name(value: str) -> str:
    if not is_type_name(value):
        raise ValueError(f"{value!r} {TYPE_NAME_MESSAGE}")
    return value


def _check_edge_type_key(value: str) -> str:
    if not is_edge_type_key(value):
        raise ValueError(f"{value!r} {KEY_MESSAGE}")
    return value


def _check_unique(values: list[str]) -> list[str]:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"lists {value!r} twice; name each type once")
        seen.add(value)
    return values


# Messages of field validators hold no ": " (SpecError reads "<path>: <message>" in them).
TYPE_NAME_MESSAGE: Final = (
    "is not a type name; use letters, digits and single underscores, starting with a letter "
    f"and not ending with '_', at most {MAX_NAME_LENGTH} characters (e.g. field_of_study)"
)
_NAMES_CEL = f"{{0}}.split('{KEY_SEPARATOR}').all(n, size(n) <= {MAX_NAME_LENGTH})"
KEY_MESSAGE: Final = (
    "must be an edge type written src__rel__dst, e.g. author__writes__paper, of three names of "
    f"letters, digits and single underscores, each starting with a letter and at most "
    f"{MAX_NAME_LENGTH} characters"
)

TypeName = Annotated[
    str,
    AfterValidator(_check_type_name),
    Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        json_schema_extra={"pattern": f"^{STRICT_NAME_PATTERN}$"},
    ),
]
"""A node type or relation name, e.g. field_of_study."""
EdgeTypeKey = Annotated[
    str,
    AfterValidator(_check_edge_type_key),
    Field(
        min_length=5,
        max_length=3 * MAX_NAME_LENGTH + 2 * len(KEY_SEPARATOR),
        json_schema_extra={
            "pattern": STRICT_KEY_PATTERN,
            "x-kubernetes-validations": [
                {"rule": _NAMES_CEL.format("self"), "message": KEY_MESSAGE}
            ],
        },
    ),
]
"""An edge type ``src__rel__dst``, e.g. author__writes__paper."""

MAX_NODE_TYPES: Final = 64
MAX_EDGE_TYPES: Final = 128
Fanout = Annotated[list[Annotated[int, Field(ge=1, le=10_000)]], Field(min_length=1, max_length=8)]
"""Neighbours sampled per node at each layer, first layer first."""


def is_edge_type_key(key: str) -> bool:
    try:
        parse_edge_type_key(key)
    except ValueError:
        return False
    return True


def _check_fanout_keys(value: dict[str, list[int]]) -> dict[str, list[int]]:
    bad = sorted(k for k in value if not is_edge_type_key(k))
    if bad:
        raise ValueError(f"key {bad[0]!r} {KEY_MESSAGE}")
    return value


EDGE_FANOUT_KEYS_RULE: Final = (
    f"self.all(k, k.matches(r'{STRICT_KEY_PATTERN}') && {_NAMES_CEL.format('k')})"
)
EdgeFanouts = Annotated[
    dict[str, Fanout],
    AfterValidator(_check_fanout_keys),
    Field(
        max_length=MAX_EDGE_TYPES,
        json_schema_extra={
            "maxProperties": MAX_EDGE_TYPES,
            "x-kubernetes-validations": [
                {"rule": EDGE_FANOUT_KEYS_RULE, "message": f"every key {KEY_MESSAGE}"}
            ],
        },
    ),
]
"""Per-edge-type fanouts: ``src__rel__dst`` -> one entry per layer."""

# --------------------------------------------------------------------------- models


class SyntheticMagDataset(CoreModel):
    """A generated heterogeneous graph shaped like ogbn-mag, with learnable paper labels.

    At scale 1.0 it has ogbn-mag's node and edge counts: paper (736,389 nodes, the only type
    with features and labels), author (1,134,649), institution (8,740) and field_of_study
    (59,965); author__writes__paper (7,145,660 edges), paper__cites__paper (5,416,271),
    paper__has_topic__field_of_study (7,505,078) and author__affiliated_with__institution
    (1,043,998). Every count scales linearly (rounded, at least 1); the papers split as
    ogbn-mag's time split does (85.5% train, 8.8% valid, 5.7% test).
    """

    scale: float = Field(default=1.0, ge=MIN_MAG_SCALE, le=10.0)
    """Size relative to ogbn-mag: 1.0 is full size, 0.01 a hundredth of every node and edge count."""
    num_features: int = Field(default=128, ge=1, le=4096)
    """Feature dimension of paper; the other node types have no features."""
    num_classes: int = Field(default=MAG_NUM_CLASSES, ge=2, le=10_000)
    """Number of paper label classes (ogbn-mag has 349)."""
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    """Seed of the generator; the same seed gives the same graph."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            f"double(self.numClasses) <= {float(MAG_PAPERS)} * self.scale",
            f"numClasses exceeds the papers at this scale ({MAG_PAPERS:,} x scale): lower "
            "numClasses or raise scale",
            ".numClasses",
            lambda s: s.num_classes <= MAG_PAPERS * s.scale,
        ),
    )

    def num_nodes(self, node_type: str) -> int:
        """Nodes of a type at this scale."""
        full = {t.name: t.num_nodes for t in MAG_NODE_TYPES}[node_type]
        return scaled_count(full, self.scale)

    def num_edges(self, edge_type: EdgeType) -> int:
        """Edges of a relation (as generated, before reverses) at this scale."""
        return scaled_count(dict(MAG_RELATIONS)[edge_type], self.scale)


def reverse_key_cel(k: str) -> str:
    """CEL for reverse_edge_type's key of a well-formed key ``k`` (src != dst assumed)."""
    p = f"{k}.split('{KEY_SEPARATOR}')"
    n = len(REVERSE_PREFIX)
    rel = f"({p}[1].startsWith('{REVERSE_PREFIX}') ? {p}[1].substring({n}) : '{REVERSE_PREFIX}' + {p}[1])"
    return f"{p}[2] + '{KEY_SEPARATOR}' + {rel} + '{KEY_SEPARATOR}' + {p}[0]"


def reverse_declared(key: str, declared: Sequence[str]) -> bool:
    """Whether ``key`` is the rev_ reverse of a declared relation between two types."""
    if not is_edge_type_key(key):
        return False
    src, rel, dst = key.split(KEY_SEPARATOR)
    if src == dst:
        return False
    rev = rel[len(REVERSE_PREFIX) :] if rel.startswith(REVERSE_PREFIX) else REVERSE_PREFIX + rel
    return KEY_SEPARATOR.join((dst, rev, src)) in declared


class HeteroDataset(CoreModel):
    """The heterogeneous side of a dataset: its target type and, optionally, its types.

    With ``ogb`` or ``pyg`` it makes the files a heterogeneous graph (OGB's raw layout of
    ogbn-mag, or a ``torch_geometric.data.HeteroData``); with ``syntheticMag`` it may set
    addReverseEdges. Declared ``nodeTypes`` and ``edgeTypes`` let admission check
    ``model.edgeFanouts`` before the job starts; the workload checks them against the files.
    """

    target_node_type: TypeName | None = None
    """The node type whose labels are trained on and evaluated, e.g. paper; unset means the only node type that has labels (paper in ogbn-mag and syntheticMag)."""
    node_types: (
        Annotated[
            list[TypeName],
            AfterValidator(_check_unique),
            Field(
                min_length=1,
                max_length=MAX_NODE_TYPES,
                json_schema_extra={"x-kubernetes-list-type": "set"},
            ),
        ]
        | None
    ) = None
    """The node types of ogb or pyg files, e.g. [paper, author]; unset: whatever the files hold."""
    edge_types: (
        Annotated[
            list[EdgeTypeKey],
            AfterValidator(_check_unique),
            Field(
                min_length=1,
                max_length=MAX_EDGE_TYPES,
                json_schema_extra={"x-kubernetes-list-type": "set"},
            ),
        ]
        | None
    ) = None
    """The relations stored in ogb or pyg files, as src__rel__dst, without the reverses addReverseEdges adds; unset: whatever the files hold."""
    add_reverse_edges: bool = True
    """Add the reverse src<-dst of every relation between two types, named rev_<rel>, and make relations within one type undirected, as PyG's ToUndirected does."""

    _rules: ClassVar[tuple[CelRule, ...]] = (
        _cel(
            "!has(self.targetNodeType) || !has(self.nodeTypes) "
            "|| self.targetNodeType in self.nodeTypes",
            "targetNodeType must be one of nodeTypes",
            ".targetNodeType",
            lambda s: (
                s.target_node_type is None
                or s.node_types is None
                or s.target_node_type in s.node_types
            ),
        ),
        _cel(
            "!has(self.nodeTypes) || !has(self.edgeTypes) || self.edgeTypes.all(e, "
            f"!e.matches(r'{STRICT_KEY_PATTERN}') || (e.split('{KEY_SEPARATOR}')[0] in "
            f"self.nodeTypes && e.split('{KEY_SEPARATOR}')[2] in self.nodeTypes))",
            "every edge type's source and destination must be one of nodeTypes",
            ".edgeTypes",
            lambda s: (
                s.node_types is None
                or s.edge_types is None
                or all(
                    parse_edge_type_key(e)[0] in s.node_types
                    and parse_edge_type_key(e)[2] in s.node_types
                    for e in s.edge_types
                )
            ),
        ),
        _cel(
            "!self.addReverseEdges || !has(self.edgeTypes) || self.edgeTypes.all(e, "
            f"!e.matches(r'{STRICT_KEY_PATTERN}') || "
            f"e.split('{KEY_SEPARATOR}')[0] == e.split('{KEY_SEPARATOR}')[2] || "
            f"!(({reverse_key_cel('e')}) in self.edgeTypes))",
            "edgeTypes holds a relation and its rev_ reverse, which addReverseEdges adds "
            "again: remove the reverse, or set addReverseEdges to false when the files hold "
            "both directions",
            ".edgeTypes",
            lambda s: (
                not s.add_reverse_edges
                or s.edge_types is None
                or not any(reverse_declared(e, s.edge_types) for e in s.edge_types)
            ),
        ),
    )
