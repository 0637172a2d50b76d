"""The admission rules of heterogeneous jobs: the job's, the dataset's and the model's.

Each is a CEL rule the API server enforces and the same check in Python
(:mod:`distgnn_api.cel`); the spec's models collect them (``JOB_RULES`` on the job spec,
``DATASET_RULES`` on the dataset, ``MODEL_RULES`` on the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.edge_types import (
    KEY_SEPARATOR,
    STRICT_KEY_PATTERN,
    edge_type_keys,
    parse_edge_type_key,
)
from distgnn_api.hetero import is_edge_type_key, reverse_declared, reverse_key_cel
from distgnn_api.mag_shape import MAG_TARGET_NODE_TYPE, mag_edge_types

HETERO_CEL = "(has(self.dataset.syntheticMag) || has(self.dataset.hetero))"
"""CEL, on the job spec: the dataset is heterogeneous."""
RELATIONAL_ARCHS: Final = ("rsage", "rgcn")

MAG_KEYS: Final = edge_type_keys(mag_edge_types(add_reverse_edges=True))
"""syntheticMag's edge types with the reverse ones (dataset.hetero.addReverseEdges, the default)."""
MAG_RELATION_KEYS: Final = edge_type_keys(mag_edge_types(add_reverse_edges=False))
"""syntheticMag's relations, without their reverses."""


def cel_list(values: Sequence[str]) -> str:
    """A CEL list literal of strings."""
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


MAG_KNOWN_CEL: Final = (
    "((!has(self.dataset.hetero) || self.dataset.hetero.addReverseEdges) ? "
    f"{cel_list(MAG_KEYS)} : {cel_list(MAG_RELATION_KEYS)})"
)
"""CEL, on the job spec: the edge types syntheticMag has (:func:`mag_known_keys`)."""
MAG_KNOWN_LIST: Final = (
    ", ".join(MAG_RELATION_KEYS)
    + " and, unless dataset.hetero.addReverseEdges is false, "
    + ", ".join(k for k in MAG_KEYS if k not in MAG_RELATION_KEYS)
)
"""The edge types syntheticMag has, in words for a rule's message."""


def is_hetero(spec: Any) -> bool:
    """The job's dataset is heterogeneous (:data:`HETERO_CEL`)."""
    return bool(spec.dataset.synthetic_mag is not None or spec.dataset.hetero is not None)


def mag_known_keys(spec: Any) -> list[str]:
    """The edge types syntheticMag has: with their reverses unless addReverseEdges is false."""
    hetero = spec.dataset.hetero
    return MAG_KEYS if hetero is None or hetero.add_reverse_edges else MAG_RELATION_KEYS


def _known_to_declared(spec: Any) -> bool:
    hetero = spec.dataset.hetero
    if hetero is None or hetero.edge_types is None or not spec.model.edge_fanouts:
        return True
    return all(
        not is_edge_type_key(k)
        or k in hetero.edge_types
        or (hetero.add_reverse_edges and reverse_declared(k, hetero.edge_types))
        for k in spec.model.edge_fanouts
    )


def declared_node_types_cel(key: str) -> str:
    """CEL, on the job spec: the strict edge-type key ``key`` (a CEL expression) leads between
    node types that dataset.hetero.nodeTypes declares (true for a key of another form, which
    its own rule refuses)."""
    types = "self.dataset.hetero.nodeTypes"
    return (
        f"(!{key}.matches(r'{STRICT_KEY_PATTERN}') || "
        f"({key}.split('{KEY_SEPARATOR}')[0] in {types} && "
        f"{key}.split('{KEY_SEPARATOR}')[2] in {types}))"
    )


def between_declared_node_types(spec: Any, key: str | None) -> bool:
    """The edge type ``key`` leads between declared node types (True when none are declared
    or the key is unset or malformed): :func:`declared_node_types_cel`."""
    hetero = spec.dataset.hetero
    if key is None or hetero is None or hetero.node_types is None or not is_edge_type_key(key):
        return True
    src, _, dst = parse_edge_type_key(key)
    return src in hetero.node_types and dst in hetero.node_types


DECLARED_NODE_TYPES_CEL: Final = "(has(self.dataset.hetero) && has(self.dataset.hetero.nodeTypes))"
"""CEL, on the job spec: the dataset declares its node types."""


def _holders_cel() -> str:
    return "(self.samplers.replicas > 0 ? self.samplers.replicas : self.trainers.replicas)"


def _known_to_mag(spec: Any) -> bool:
    if spec.dataset.synthetic_mag is None or not spec.model.edge_fanouts:
        return True
    known = mag_known_keys(spec)
    return all(k in known for k in spec.model.edge_fanouts)


JOB_RULES: Final[tuple[CelRule, ...]] = (
    _cel(
        f"!(self.model.arch in {cel_list(RELATIONAL_ARCHS)}) || {HETERO_CEL}",
        "rsage and rgcn are relational: they need a heterogeneous dataset (syntheticMag, or "
        "dataset.hetero with ogb or pyg files); for a homogeneous graph use sage, gcn or gat",
        ".model.arch",
        lambda s: s.model.arch.value not in RELATIONAL_ARCHS or is_hetero(s),
    ),
    _cel(
        f"!{HETERO_CEL} || self.model.arch in {cel_list(RELATIONAL_ARCHS)}",
        "a heterogeneous dataset needs a relational model: set model.arch to rsage "
        "(to_hetero(GraphSAGE)) or rgcn (R-GCN); sage, gcn and gat are for homogeneous graphs",
        ".model.arch",
        lambda s: not is_hetero(s) or s.model.arch.value in RELATIONAL_ARCHS,
    ),
    _cel(
        "!has(self.model.edgeFanouts) || size(self.model.edgeFanouts) == 0 || " + HETERO_CEL,
        "edgeFanouts needs a heterogeneous dataset (syntheticMag, or dataset.hetero); a "
        "homogeneous graph has one edge type: use fanout",
        ".model.edgeFanouts",
        lambda s: not s.model.edge_fanouts or is_hetero(s),
    ),
    _cel(
        "!has(self.model.embeddingDim) || " + HETERO_CEL,
        "embeddingDim sizes the learnt embeddings of featureless node types in a "
        "heterogeneous dataset; remove it for a homogeneous graph",
        ".model.embeddingDim",
        lambda s: s.model.embedding_dim is None or is_hetero(s),
    ),
    _cel(
        "!has(self.dataset.syntheticMag) || !has(self.model.edgeFanouts) || "
        f"self.model.edgeFanouts.all(k, k in {MAG_KNOWN_CEL})",
        "edgeFanouts names an edge type that syntheticMag does not have; it has " + MAG_KNOWN_LIST,
        ".model.edgeFanouts",
        _known_to_mag,
    ),
    _cel(
        "!has(self.dataset.hetero) || !has(self.dataset.hetero.edgeTypes) || "
        "!has(self.model.edgeFanouts) || self.model.edgeFanouts.all(k, "
        f"!k.matches(r'{STRICT_KEY_PATTERN}') || k in self.dataset.hetero.edgeTypes || "
        "(self.dataset.hetero.addReverseEdges && "
        f"k.split('{KEY_SEPARATOR}')[0] != k.split('{KEY_SEPARATOR}')[2] && "
        f"({reverse_key_cel('k')}) in self.dataset.hetero.edgeTypes))",
        "edgeFanouts names an edge type that is neither in dataset.hetero.edgeTypes nor, with "
        "addReverseEdges, the rev_ reverse of one: fix the key or declare the relation",
        ".model.edgeFanouts",
        _known_to_declared,
    ),
    _cel(
        f"!{DECLARED_NODE_TYPES_CEL} || !has(self.model.edgeFanouts) || "
        f"self.model.edgeFanouts.all(k, {declared_node_types_cel('k')})",
        "edgeFanouts names an edge type whose source or destination is not in "
        "dataset.hetero.nodeTypes: fix the key or declare the node type",
        ".model.edgeFanouts",
        lambda s: all(between_declared_node_types(s, k) for k in s.model.edge_fanouts or {}),
    ),
    _cel(
        f"!{HETERO_CEL} || !has(self.partition.numPartitions) || "
        f"self.partition.numPartitions == {_holders_cel()}",
        "a heterogeneous job has one partition per holder (samplers.replicas, or "
        "trainers.replicas when samplers.replicas is 0): leave numPartitions unset or set it "
        "to that count",
        ".partition.numPartitions",
        lambda s: (
            not is_hetero(s)
            or s.partition.num_partitions is None
            or s.partition.num_partitions == s.num_holders
        ),
    ),
)
"""The job spec's rules for heterogeneous datasets (they read the dataset and the model)."""

DATASET_RULES: Final[tuple[CelRule, ...]] = (
    _cel(
        "!has(self.hetero) || !has(self.synthetic)",
        "hetero describes a heterogeneous dataset: use it with syntheticMag, ogb or pyg; "
        "synthetic generates a homogeneous graph",
        ".hetero",
        lambda s: s.hetero is None or s.synthetic is None,
    ),
    _cel(
        "!has(self.syntheticMag) || !has(self.hetero) || !has(self.hetero.targetNodeType) || "
        f"self.hetero.targetNodeType == '{MAG_TARGET_NODE_TYPE}'",
        f"syntheticMag has labels on {MAG_TARGET_NODE_TYPE} only: set targetNodeType to "
        f"{MAG_TARGET_NODE_TYPE} or leave it unset",
        ".hetero.targetNodeType",
        lambda s: (
            s.synthetic_mag is None
            or s.hetero is None
            or s.hetero.target_node_type in (None, MAG_TARGET_NODE_TYPE)
        ),
    ),
    _cel(
        "!has(self.syntheticMag) || !has(self.hetero) || "
        "(!has(self.hetero.nodeTypes) && !has(self.hetero.edgeTypes))",
        "syntheticMag's node and edge types are fixed (ogbn-mag's); nodeTypes and edgeTypes "
        "describe ogb or pyg files: remove them",
        ".hetero",
        lambda s: (
            s.synthetic_mag is None
            or s.hetero is None
            or (s.hetero.node_types is None and s.hetero.edge_types is None)
        ),
    ),
)
"""The dataset's rules for its heterogeneous side."""

MODEL_RULES: Final[tuple[CelRule, ...]] = (
    _cel(
        "!has(self.edgeFanouts) || self.edgeFanouts.all(k, size(self.edgeFanouts[k]) == "
        "self.numLayers)",
        "every edgeFanouts list must have exactly one entry per layer (numLayers)",
        ".edgeFanouts",
        lambda s: (
            not s.edge_fanouts or all(len(f) == s.num_layers for f in s.edge_fanouts.values())
        ),
    ),
)
"""The model's rules for per-edge-type fanouts."""
