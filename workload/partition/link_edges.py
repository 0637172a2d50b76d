"""The edge split of a link-prediction job: which pairs are supervised in train, valid and
test, which stay visible to message passing, and the fixed evaluation negatives.

Everything here is in the dataset's node ids and pure numpy; :mod:`.link_split` writes the
result into the store. The rules:

- Edges are directed pairs; a self-loop is dropped, and of the same unordered pair only the
  first occurrence counts (the store's topology is undirected).
- Fractions (``split.valid``/``split.test``) draw valid and test pairs from the distinct
  pairs with ``partition.seed``; the rest are the training positives. ``fromDataset`` takes
  the dataset's own valid and test positives (and its train positives where it lists them).
- The message-passing topology holds training pairs only: a pair that is a valid or test
  positive is removed in both directions, whatever the dataset's edge list holds, so no
  held-out edge (nor its reverse) is ever visible to message passing. A training positive
  that is also held out is dropped from training.
- Evaluation negatives are ``K`` uniform destinations per valid and test positive, drawn
  once with the seed (or the dataset's own, e.g. ogbl-citation2's ``target_node_neg``); with
  ``negatives: all`` there are none and each positive ranks against every node.
- ``maxPositives`` keeps a seeded random subset of each held-out split for evaluation; the
  rest stays held out of the topology and of training.

A typed graph's split (:func:`split_typed_edges`), in type-local ids, uses the same fraction
split, cap and negatives:

- The supervised pairs are the stored edges of ``edgeType`` ``(s, r, d)``; a relation
  within one type (made undirected by the loader) counts each unordered pair once, without
  self-loops, as the homogeneous split does.
- ``split.valid``/``split.test`` fractions draw the held-out pairs with ``partition.seed``
  (typed datasets carry no edge split of their own: admission refuses ``fromDataset``).
- Every valid and test pair leaves the message-passing topology: from ``edgeType``'s CSR
  and, with ``excludeReverse``, its reverse from ``reverseEdgeType``'s (``d -> s``; a
  relation within one type drops both directions from its own CSR).
- Evaluation negatives are ``K`` uniform destinations of type ``d`` per held-out positive.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
from distgnn_workload.data.csr import CSR, index_dtype
from distgnn_workload.data.distinct_pairs import first_occurrences, sorted_pair_keys
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.host_threads import run_parallel
from distgnn_workload.data.link_data import GivenEdges, IdArray, LinkData

HELD_OUT = ("valid", "test")
NEGATIVES_FIELD = "spec.linkPrediction.evaluation.negatives"
MAX_NEGATIVE_ENTRIES = 250_000_000
"""Stored negatives per held-out split (positives x negatives): about 1 GB on disk. Beyond
it, ``evaluation.maxPositives`` must cap the positives (ogbl-citation2 itself has 86,596 x
1000; a full-scale generated graph's 5% is 1.5M x 1000)."""
NEGATIVE_ROWS = 1 << 13
"""Positives whose evaluation negatives one stream draws (changing it changes them)."""
"""How these draws are made is :data:`distgnn_api.link.LINK_SPLIT_VERSION`, which the
store's content key carries: change it with them."""


@dataclass
class EdgeSplits:
    """The three edge sets of a link split, by name (``"train"``, ``"valid"``, ``"test"``)."""

    train: GivenEdges
    valid: GivenEdges
    test: GivenEdges

    def split(self, name: str) -> GivenEdges:
        return {"train": self.train, "valid": self.valid, "test": self.test}[name]


@dataclass(kw_only=True)
class EdgeSplitResult(EdgeSplits):
    """A link dataset split for training: the topology's pairs and the three edge sets."""

    topology_keys: IdArray
    """Sorted distinct keys ``lo * N + hi`` of the undirected message-passing pairs."""
    num_nodes: int
    info: dict[str, Any] = field(default_factory=dict)


def pair_keys(src: IdArray, dst: IdArray, n: int) -> IdArray:
    """Unordered pair keys ``min * n + max``."""
    nn = np.int64(n)
    return np.minimum(src, dst) * nn + np.maximum(src, dst)


def first_distinct(src: IdArray, dst: IdArray, n: int) -> tuple[IdArray, IdArray, int]:
    """The pairs without self-loops, each unordered pair once (its first occurrence, in
    order); returns them and the count dropped."""
    first = first_occurrences(src, dst, n)
    return src[first], dst[first], len(src) - len(first)


def split_edges(data: LinkData, lp: LinkPrediction, seed: int) -> EdgeSplitResult:
    """Split ``data``'s edges as ``lp`` says, drawing with ``seed``."""
    n = data.num_nodes
    if lp.evaluation.all_negatives:
        try:
            check_all_negatives(n)
        except ValueError as err:
            raise DatasetError(str(err).partition(": ")[2], source=NEGATIVES_FIELD) from None
    split_seq, neg_seq, cap_seq = np.random.SeedSequence([seed, 14]).spawn(3)
    split_rng, cap_rng = np.random.default_rng(split_seq), np.random.default_rng(cap_seq)
    src, dst, dropped = first_distinct(data.src, data.dst, n)
    info: dict[str, Any] = {"duplicate_or_self_loop_edges_dropped": dropped}
    if lp.split.from_dataset:
        held, train_src, train_dst = given_split(data)
        info["split"] = "dataset"
    else:
        held, train_src, train_dst = fraction_split(src, dst, lp, split_rng)
        info["split"] = "fractions"
    held_keys = np.unique(np.concatenate([pair_keys(e.src, e.dst, n) for e in held.values()]))
    if lp.split.from_dataset:
        topo = pair_keys(src, dst, n)
        topology_keys = np.unique(topo[~np.isin(topo, held_keys)])
        del topo
        leaked = np.isin(pair_keys(train_src, train_dst, n), held_keys)
    else:
        # fractions split distinct pairs: the training pairs are exactly the rest
        topology_keys = sorted_pair_keys(train_src, train_dst, n)
        leaked = np.zeros(len(train_src), dtype=np.bool_)
    train = GivenEdges(train_src[~leaked], train_dst[~leaked])
    info["train_positives_also_held_out_dropped"] = int(leaked.sum())
    out: dict[str, GivenEdges] = {}
    for i, name in enumerate(HELD_OUT):
        edges = cap_split(held[name], lp.evaluation.max_positives, cap_rng)
        out[name] = with_negatives(edges, lp, n, neg_seq.spawn(i + 1)[i], name)
    info.update(
        held_out_pairs=len(held_keys),
        topology_pairs=len(topology_keys),
        **{f"num_{k}": len(v) for k, v in (("train", train), *out.items())},
    )
    return EdgeSplitResult(
        train=train,
        valid=out["valid"],
        test=out["test"],
        topology_keys=topology_keys,
        num_nodes=n,
        info=info,
    )


def fraction_split(
    src: IdArray, dst: IdArray, lp: LinkPrediction, rng: np.random.Generator
) -> tuple[dict[str, GivenEdges], IdArray, IdArray]:
    e = len(src)
    n_valid = round(e * lp.split.valid_fraction)
    n_test = round(e * lp.split.test_fraction)
    if e < 3 or n_valid < 1 or n_test < 1 or n_valid + n_test >= e:
        raise DatasetError(
            f"{e} distinct edges cannot split into train, valid ({lp.split.valid_fraction}) "
            f"and test ({lp.split.test_fraction}) with at least one edge each; use a larger "
            "graph or larger fractions",
            source="spec.linkPrediction.split",
        )
    perm = rng.permutation(e)
    parts = {"valid": perm[:n_valid], "test": perm[n_valid : n_valid + n_test]}
    keep = np.ones(e, dtype=np.bool_)
    keep[perm[: n_valid + n_test]] = False
    train = np.flatnonzero(keep)  # the sorted rest, in O(e)
    del keep
    held = {k: GivenEdges(src[np.sort(ix)], dst[np.sort(ix)]) for k, ix in parts.items()}
    return held, src[train], dst[train]


def given_split(data: LinkData) -> tuple[dict[str, GivenEdges], IdArray, IdArray]:
    given = data.given
    if given is None or any(k not in given for k in HELD_OUT):
        raise DatasetError(
            "the dataset has no valid and test edge split of its own; set "
            "linkPrediction.split.valid and split.test fractions instead of fromDataset",
            source="spec.linkPrediction.split.fromDataset",
        )
    train = given.get("train")
    if train is None:
        return {k: given[k] for k in HELD_OUT}, data.src, data.dst
    return {k: given[k] for k in HELD_OUT}, train.src, train.dst


def cap_split(edges: GivenEdges, cap: int | None, rng: np.random.Generator) -> GivenEdges:
    if cap is None or len(edges) <= cap:
        return edges
    keep = np.sort(rng.choice(len(edges), size=cap, replace=False))
    neg = None if edges.dst_neg is None else edges.dst_neg[keep]
    return GivenEdges(edges.src[keep], edges.dst[keep], neg)


def with_negatives(
    edges: GivenEdges, lp: LinkPrediction, n: int, seq: np.random.SeedSequence, name: str
) -> GivenEdges:
    negatives = lp.evaluation.negatives
    if isinstance(negatives, str):  # "all": every node is a candidate
        return GivenEdges(edges.src, edges.dst, None)
    if len(edges) * negatives > MAX_NEGATIVE_ENTRIES:
        raise DatasetError(
            f"the {name} split has {len(edges):,} positives: with {negatives} negatives each "
            f"the store would hold {len(edges) * negatives:,} negatives (at most "
            f"{MAX_NEGATIVE_ENTRIES:,}); set evaluation.maxPositives to at most "
            f"{MAX_NEGATIVE_ENTRIES // negatives:,}, e.g. 100000",
            source="spec.linkPrediction.evaluation.maxPositives",
        )
    if edges.dst_neg is not None:
        have = edges.dst_neg.shape[1]
        if negatives > have:
            raise DatasetError(
                f"the dataset's {name} split has {have} negatives per positive, fewer than "
                f"{negatives}; set evaluation.negatives to at most {have}",
                source=NEGATIVES_FIELD,
            )
        return GivenEdges(edges.src, edges.dst, np.ascontiguousarray(edges.dst_neg[:, :negatives]))
    return GivenEdges(edges.src, edges.dst, uniform_negatives(seq, n, len(edges), negatives))


def uniform_negatives(
    seq: np.random.SeedSequence, n: int, rows: int, per_row: int
) -> npt.NDArray[np.integer[Any]]:
    """``[rows, per_row]`` uniform node ids (int32 below 2^31 nodes: half the bytes); each
    block of :data:`NEGATIVE_ROWS` rows draws from its own child stream of ``seq``, on all
    cores (the same ids whatever the threads)."""
    dtype = index_dtype(n)
    out = np.empty((rows, per_row), dtype=dtype)

    def block(i: int, a: int, b: int) -> None:
        key = (*seq.spawn_key, i)
        rng = np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=key))
        out[a:b] = rng.integers(0, n, (b - a, per_row), dtype=dtype)

    starts = range(0, rows, NEGATIVE_ROWS)
    run_parallel(block, [(i, a, min(a + NEGATIVE_ROWS, rows)) for i, a in enumerate(starts)])
    return out


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
