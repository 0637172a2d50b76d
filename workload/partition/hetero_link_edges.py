"""The edge split of a heterogeneous link-prediction job: the supervised edge type's edges
split into train, valid and test, and held out of message passing with their reverses.

The typed counterpart of :mod:`.link_edges` (whose fraction split, cap and negatives it
uses), in type-local ids, pure numpy:

- The supervised pairs are the stored edges of ``edgeType`` ``(s, r, d)``; a relation
  within one type (made undirected by the loader) counts each unordered pair once, without
  self-loops, as the homogeneous split does.
- ``split.valid``/``split.test`` fractions draw the held-out pairs with ``partition.seed``
  (heterogeneous datasets carry no edge split of their own: admission refuses
  ``fromDataset`` for them).
- Every valid and test pair leaves the message-passing topology: from ``edgeType``'s CSR
  and, with ``excludeReverse``, its reverse from ``reverseEdgeType``'s (``d -> s``; a
  relation within one type drops both directions from its own CSR).
- Evaluation negatives are ``K`` uniform destinations of type ``d`` per held-out positive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import (
    EdgeType,
    edge_type_key,
    parse_edge_type_key,
    reverse_edge_type,
)
from distgnn_api.link import LinkPrediction, check_all_negatives
from distgnn_workload.data.csr import CSR
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.link_data import GivenEdges, IdArray
from distgnn_workload.partition.link_edges import (
    HELD_OUT,
    NEGATIVES_FIELD,
    EdgeSplits,
    cap_split,
    first_distinct,
    fraction_split,
    with_negatives,
)
from distgnn_workload.partition.link_split import (
    LINK_META_KEY,
    TASK_KEY,
    TASK_LINK,
    write_split_arrays,
)

EDGE_TYPE_FIELD = "spec.linkPrediction.edgeType"
REVERSE_FIELD = "spec.linkPrediction.reverseEdgeType"


@dataclass(kw_only=True)
class TypedEdgeSplit(EdgeSplits):
    """The supervised edge type's three edge sets (type-local ids) and what it removed."""

    edge_type: EdgeType
    reverse: EdgeType | None
    """The edge type whose ``d -> s`` edges left message passing too (``edge_type`` itself
    within one type), or None."""
    info: dict[str, Any] = field(default_factory=dict)


def link_edge_types(
    graph_types: list[EdgeType], lp: LinkPrediction
) -> tuple[EdgeType, EdgeType | None]:
    """The supervised edge type and the one holding its reverses (None: nothing to exclude),
    checked against the loaded graph's edge types; errors name the spec field."""
    known = ", ".join(edge_type_key(et) for et in graph_types)
    if lp.edge_type is None:
        raise DatasetError(
            "a heterogeneous dataset needs the supervised edge type, e.g. author__writes__paper",
            source=EDGE_TYPE_FIELD,
        )
    et = parse_edge_type_key(lp.edge_type)
    if et not in graph_types:
        raise DatasetError(
            f"{lp.edge_type} is not an edge type of the dataset ({known})", source=EDGE_TYPE_FIELD
        )
    if lp.reverse_edge_type is not None:
        rev = parse_edge_type_key(lp.reverse_edge_type)
        if rev not in graph_types:
            raise DatasetError(
                f"{lp.reverse_edge_type} is not an edge type of the dataset ({known}); unset it "
                "for the rev_ reverse that addReverseEdges adds",
                source=REVERSE_FIELD,
            )
        if (rev[0], rev[2]) != (et[2], et[0]):
            raise DatasetError(
                f"{lp.reverse_edge_type} does not lead from {et[2]} back to {et[0]}: the reverse "
                f"of {lp.edge_type} must be {et[2]}__<rel>__{et[0]}",
                source=REVERSE_FIELD,
            )
    else:
        rev = reverse_edge_type(et)
    if not lp.exclude_reverse:
        return et, None
    return et, rev if rev in graph_types else None


def _pairs(csr: CSR) -> tuple[IdArray, IdArray]:
    indptr, indices = csr
    dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    return np.asarray(indices, dtype=np.int64), dst


def _without(csr: CSR, num_src: int, drop: IdArray) -> tuple[CSR, int]:
    """``csr`` without the edges whose key ``dst * num_src + src`` is in ``drop``."""
    src, dst = _pairs(csr)
    keep = ~np.isin(dst * np.int64(num_src) + src, drop)
    indptr = np.zeros(len(csr[0]), dtype=np.int64)
    np.cumsum(np.bincount(dst[keep], minlength=len(indptr) - 1), out=indptr[1:])
    return (indptr, np.ascontiguousarray(np.asarray(csr[1])[keep])), int((~keep).sum())


def split_typed_edges(
    graph: HeteroGraphData, lp: LinkPrediction, seed: int
) -> tuple[HeteroGraphData, TypedEdgeSplit]:
    """Split ``lp.edgeType``'s edges of ``graph`` as ``lp`` says, drawing with ``seed``;
    returns the graph without the held-out pairs (and their reverses) and the split."""
    et, rev = link_edge_types(graph.edge_types, lp)
    s, _, d = et
    n_s, n_d = graph.node_counts[s], graph.node_counts[d]
    if lp.evaluation.all_negatives:
        try:
            check_all_negatives(n_d)
        except ValueError as err:
            raise DatasetError(str(err).partition(": ")[2], source=NEGATIVES_FIELD) from None
    if lp.split.from_dataset:
        raise DatasetError(
            "a heterogeneous dataset has no edge split of its own; set split.valid and "
            "split.test fractions",
            source="spec.linkPrediction.split.fromDataset",
        )
    split_seq, neg_seq, cap_seq = np.random.SeedSequence([seed, 14]).spawn(3)
    split_rng, cap_rng = np.random.default_rng(split_seq), np.random.default_rng(cap_seq)
    src, dst = _pairs(graph.in_csr[et])
    dropped = 0
    if s == d:
        src, dst, dropped = first_distinct(src, dst, n_s)
    held, train_src, train_dst = fraction_split(src, dst, lp, split_rng)
    h_src = np.concatenate([e.src for e in held.values()])
    h_dst = np.concatenate([e.dst for e in held.values()])
    in_csr = dict(graph.in_csr)
    forward = h_dst * np.int64(n_s) + h_src
    if rev == et:  # one type: both directions live in this CSR
        forward = np.concatenate([forward, h_src * np.int64(n_s) + h_dst])
    in_csr[et], removed = _without(in_csr[et], n_s, np.unique(forward))
    removed_rev = 0
    if rev is not None and rev != et:
        in_csr[rev], removed_rev = _without(
            in_csr[rev], n_d, np.unique(h_src * np.int64(n_d) + h_dst)
        )
    out: dict[str, GivenEdges] = {}
    for i, name in enumerate(HELD_OUT):
        edges = cap_split(held[name], lp.evaluation.max_positives, cap_rng)
        out[name] = with_negatives(edges, lp, n_d, neg_seq.spawn(i + 1)[i], name)
    info: dict[str, Any] = {
        "split": "fractions",
        "edge_type": edge_type_key(et),
        "reverse_edge_type": None if rev is None else edge_type_key(rev),
        "duplicate_or_self_loop_edges_dropped": dropped,
        "held_out_edges_removed": removed,
        "held_out_reverse_edges_removed": removed_rev,
        "num_train": len(train_src),
        **{f"num_{k}": len(v) for k, v in out.items()},
    }
    split = TypedEdgeSplit(
        train=GivenEdges(train_src, train_dst),
        valid=out["valid"],
        test=out["test"],
        edge_type=et,
        reverse=rev,
        info=info,
    )
    return replace(graph, in_csr=in_csr, info={**graph.info, "link": info}), split


def split_writer(
    split: TypedEdgeSplit, owner_src: npt.NDArray[Any], k: int, num_dst: int
) -> Callable[[Path, dict[str, Any]], None]:
    """What adds the split to a typed store being written: ``link/`` (the homogeneous
    layout, :mod:`.link_split`, in type-local ids; training positives by the partition
    owning their source) and META.json's ``task`` and ``link`` records."""

    def write(root: Path, meta: dict[str, Any]) -> None:
        owner = np.asarray(owner_src)[split.train.src]
        held = {name: split.split(name) for name in HELD_OUT}
        record = write_split_arrays(root, split.train, owner, k, held, split.info, num_dst)
        record.update(
            edge_type=edge_type_key(split.edge_type),
            reverse_edge_type=(None if split.reverse is None else edge_type_key(split.reverse)),
        )
        meta[TASK_KEY] = TASK_LINK
        meta[LINK_META_KEY] = record

    return write
