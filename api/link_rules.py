"""Admission rules of link prediction that read the whole job: the task against its section,
the supervised edge type against the dataset's types, the dataset's own split, and
``negatives: all`` against the size of a generated graph. Each rule is written twice, as CEL
for the CRD and in Python for ``distgnn validate`` (:mod:`distgnn_api.cel`).
"""

from __future__ import annotations

from typing import Any, Final

from distgnn_api.cel import CelRule
from distgnn_api.cel import cel as _cel
from distgnn_api.edge_types import KEY_SEPARATOR, STRICT_KEY_PATTERN
from distgnn_api.hetero import reverse_declared, reverse_key_cel
from distgnn_api.hetero_rules import (
    DECLARED_NODE_TYPES_CEL,
    HETERO_CEL,
    MAG_KNOWN_CEL,
    MAG_KNOWN_LIST,
    MAG_RELATION_KEYS,
    between_declared_node_types,
    cel_list,
    declared_node_types_cel,
    is_hetero,
    mag_known_keys,
)
from distgnn_api.link import (
    ALL_NEGATIVES_MAX_NODES,
    CITATION2_NODES,
    LinkPrediction,
    Task,
)
from distgnn_api.mag_shape import MAG_NODE_TYPES

# --------------------------------------------------------------------------- admission rules

_LP = "has(self.linkPrediction)"
_MAG_LARGEST_TYPE: Final = max(t.num_nodes for t in MAG_NODE_TYPES)
_LIMIT = ALL_NEGATIVES_MAX_NODES + 0.5  # round(n * scale) <= limit


def _lp(s: Any) -> LinkPrediction | None:
    lp: LinkPrediction | None = s.link_prediction
    return lp


def _all_fits(s: Any) -> bool:
    lp = _lp(s)
    if lp is None or not lp.evaluation.all_negatives:
        return True
    d = s.dataset
    if d.synthetic is not None:
        return bool(d.synthetic.num_nodes <= ALL_NEGATIVES_MAX_NODES)
    if d.synthetic_link is not None:
        return bool(d.synthetic_link.scale * CITATION2_NODES < _LIMIT)
    if d.synthetic_mag is not None:
        return bool(d.synthetic_mag.scale * _MAG_LARGEST_TYPE < _LIMIT)
    return True


def _edge_type_known(s: Any, key: str | None, *, reverse: bool) -> bool:
    """Whether a set edgeType (or reverseEdgeType) is one the generator or the declared
    types have; True when it cannot be told (types only the files know)."""
    if key is None:
        return True
    d = s.dataset
    if d.synthetic_mag is not None:
        return key in (mag_known_keys(s) if reverse else MAG_RELATION_KEYS)
    if d.hetero is not None and d.hetero.edge_types is not None:
        declared = d.hetero.edge_types
        add_reverse = d.hetero.add_reverse_edges
        return key in declared or (reverse and add_reverse and reverse_declared(key, declared))
    return True


_REV_KEY_CEL = reverse_key_cel("self.linkPrediction.reverseEdgeType")

JOB_RULES: Final[tuple[CelRule, ...]] = (
    _cel(
        f"self.task != '{Task.link_prediction.value}' || {_LP}",
        "task linkPrediction needs the linkPrediction section (at least {}): add it, or "
        "set task to nodeClassification",
        ".linkPrediction",
        lambda s: s.task != Task.link_prediction or s.link_prediction is not None,
    ),
    _cel(
        f"!{_LP} || self.task == '{Task.link_prediction.value}'",
        "linkPrediction applies to task linkPrediction only: set task to linkPrediction, "
        "or remove linkPrediction",
        ".linkPrediction",
        lambda s: s.link_prediction is None or s.task == Task.link_prediction,
    ),
    _cel(
        f"!has(self.dataset.syntheticLink) || self.task == '{Task.link_prediction.value}'",
        "syntheticLink generates a graph without labels for link prediction: set task to "
        "linkPrediction, or use dataset.synthetic for node classification",
        ".task",
        lambda s: s.dataset.synthetic_link is None or s.task == Task.link_prediction,
    ),
    _cel(
        f"!{_LP} || !{HETERO_CEL} || has(self.linkPrediction.edgeType)",
        "a heterogeneous dataset needs the supervised edge type: set "
        "linkPrediction.edgeType, e.g. author__writes__paper",
        ".linkPrediction.edgeType",
        lambda s: _lp(s) is None or not is_hetero(s) or s.link_prediction.edge_type is not None,
    ),
    _cel(
        f"!{_LP} || !has(self.linkPrediction.edgeType) || {HETERO_CEL}",
        "edgeType names an edge type of a heterogeneous dataset; a homogeneous graph has "
        "one: remove edgeType",
        ".linkPrediction.edgeType",
        lambda s: _lp(s) is None or s.link_prediction.edge_type is None or is_hetero(s),
    ),
    _cel(
        f"!{_LP} || !has(self.dataset.syntheticMag) || !has(self.linkPrediction.edgeType) || "
        f"self.linkPrediction.edgeType in {cel_list(MAG_RELATION_KEYS)}",
        "edgeType is not a relation of syntheticMag; use one of " + ", ".join(MAG_RELATION_KEYS),
        ".linkPrediction.edgeType",
        lambda s: (
            _lp(s) is None
            or s.dataset.synthetic_mag is None
            or _edge_type_known(s, s.link_prediction.edge_type, reverse=False)
        ),
    ),
    _cel(
        f"!{_LP} || !has(self.dataset.syntheticMag) || "
        "!has(self.linkPrediction.reverseEdgeType) || self.linkPrediction.reverseEdgeType in "
        + MAG_KNOWN_CEL,
        "reverseEdgeType is not an edge type of syntheticMag; it has " + MAG_KNOWN_LIST,
        ".linkPrediction.reverseEdgeType",
        lambda s: (
            _lp(s) is None
            or s.dataset.synthetic_mag is None
            or _edge_type_known(s, s.link_prediction.reverse_edge_type, reverse=True)
        ),
    ),
    _cel(
        f"!{_LP} || !has(self.dataset.hetero) || !has(self.dataset.hetero.edgeTypes) || "
        "!has(self.linkPrediction.edgeType) || "
        "self.linkPrediction.edgeType in self.dataset.hetero.edgeTypes",
        "edgeType is not in dataset.hetero.edgeTypes: fix it or declare the relation",
        ".linkPrediction.edgeType",
        lambda s: (
            _lp(s) is None
            or s.dataset.synthetic_mag is not None
            or _edge_type_known(s, s.link_prediction.edge_type, reverse=False)
        ),
    ),
    _cel(
        f"!{_LP} || !has(self.dataset.hetero) || !has(self.dataset.hetero.edgeTypes) || "
        "!has(self.linkPrediction.reverseEdgeType) || "
        f"!self.linkPrediction.reverseEdgeType.matches(r'{STRICT_KEY_PATTERN}') || "
        "self.linkPrediction.reverseEdgeType in self.dataset.hetero.edgeTypes || "
        "(self.dataset.hetero.addReverseEdges && "
        f"self.linkPrediction.reverseEdgeType.split('{KEY_SEPARATOR}')[0] != "
        f"self.linkPrediction.reverseEdgeType.split('{KEY_SEPARATOR}')[2] && "
        f"({_REV_KEY_CEL}) in self.dataset.hetero.edgeTypes)",
        "reverseEdgeType is neither in dataset.hetero.edgeTypes nor, with addReverseEdges, "
        "the rev_ reverse of one: fix it or declare the relation",
        ".linkPrediction.reverseEdgeType",
        lambda s: (
            _lp(s) is None
            or s.dataset.synthetic_mag is not None
            or _edge_type_known(s, s.link_prediction.reverse_edge_type, reverse=True)
        ),
    ),
    _cel(
        f"!{_LP} || !{DECLARED_NODE_TYPES_CEL} || !has(self.linkPrediction.edgeType) || "
        + declared_node_types_cel("self.linkPrediction.edgeType"),
        "edgeType leads from or to a node type that dataset.hetero.nodeTypes does not "
        "declare: fix it or declare the node type (reverseEdgeType, which leads back, "
        "follows)",
        ".linkPrediction.edgeType",
        lambda s: _lp(s) is None or between_declared_node_types(s, s.link_prediction.edge_type),
    ),
    _cel(
        f"!{_LP} || self.linkPrediction.excludeReverse || {HETERO_CEL}",
        "a homogeneous graph's topology is undirected, so a held-out edge leaves message "
        "passing in both directions: excludeReverse false applies to heterogeneous graphs "
        "only; remove it",
        ".linkPrediction.excludeReverse",
        lambda s: _lp(s) is None or s.link_prediction.exclude_reverse or is_hetero(s),
    ),
    _cel(
        f"!{_LP} || !self.linkPrediction.split.fromDataset || "
        "(has(self.dataset.ogb) && !has(self.dataset.hetero))",
        "fromDataset reads the split of an OGB link dataset (dataset.ogb, e.g. "
        "ogbl-citation2 or ogbl-collab); this dataset has none: set split.valid and "
        "split.test fractions instead",
        ".linkPrediction.split.fromDataset",
        lambda s: (
            _lp(s) is None
            or not s.link_prediction.split.from_dataset
            or (s.dataset.ogb is not None and s.dataset.hetero is None)
        ),
    ),
    _cel(
        f"!{_LP} || type(self.linkPrediction.evaluation.negatives) != string || "
        f"((!has(self.dataset.synthetic) || "
        f"self.dataset.synthetic.numNodes <= {ALL_NEGATIVES_MAX_NODES}) && "
        f"(!has(self.dataset.syntheticLink) || "
        f"self.dataset.syntheticLink.scale * {float(CITATION2_NODES)} < {_LIMIT}) && "
        f"(!has(self.dataset.syntheticMag) || "
        f"self.dataset.syntheticMag.scale * {float(_MAG_LARGEST_TYPE)} < {_LIMIT}))",
        f"'all' ranks each positive against every node, and this graph has more than "
        f"{ALL_NEGATIVES_MAX_NODES:,}; set a count of negatives such as 1000",
        ".linkPrediction.evaluation.negatives",
        _all_fits,
    ),
)
"""The job spec's rules for link prediction (they read the task, the dataset and the section)."""

DATASET_RULES: Final[tuple[CelRule, ...]] = (
    _cel(
        "!has(self.hetero) || !has(self.syntheticLink)",
        "hetero describes a heterogeneous dataset; syntheticLink generates a homogeneous "
        "graph: remove hetero",
        ".hetero",
        lambda s: s.hetero is None or s.synthetic_link is None,
    ),
)
"""The dataset's rules for the link generator."""
