"""What the writers of a relabelled (homogeneous) store share: the rows of a CSR in new ids,
row chunks of a bounded edge count, and the store's META.json record. Used by the in-memory
writer (:mod:`.writer`) and the out-of-core one (:mod:`.ooc_writer`).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import PARTITION_FORMAT_VERSION
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.host_threads import run_parallel
from distgnn_workload.partition.meta import PartitionStats

SORT_SLICES = 64
"""Slices of whole rows that sort a partition's neighbour lists in parallel."""


def row_chunks(indptr: npt.NDArray[np.int64], start: int, end: int, budget: int) -> list[int]:
    """Row boundaries splitting rows [start, end) into runs of about ``budget`` edges."""
    if end <= start:
        return [start, end]
    targets = np.arange(indptr[start], indptr[end], budget, dtype=np.int64)
    bounds = np.searchsorted(indptr, targets, side="right") - 1
    bounds = np.clip(bounds, start, end)
    return sorted({start, end, *bounds.tolist()})


def _ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(s, s + l)`` for each (s, l), vectorised."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


class PartOrder(NamedTuple):
    """New ids numbering the nodes part by part (each part's nodes in original order)."""

    counts: npt.NDArray[np.int64]
    """Nodes of each part."""
    offsets: npt.NDArray[np.int64]
    """Part p holds new ids ``offsets[p]`` to ``offsets[p + 1]``."""
    old_of_new: npt.NDArray[Any]
    new_of_old: npt.NDArray[Any]


def part_order(assignment: npt.NDArray[Any], k: int, idx: np.dtype[Any]) -> PartOrder:
    """The new ids of ``assignment``'s nodes over ``k`` parts, as ``idx`` integers."""
    n = len(assignment)
    counts = np.bincount(assignment, minlength=k).astype(np.int64)
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    old_of_new = np.argsort(assignment, kind="stable").astype(idx)
    new_of_old = np.empty(n, dtype=idx)
    new_of_old[old_of_new] = np.arange(n, dtype=idx)
    return PartOrder(counts, offsets, old_of_new, new_of_old)


def balance(values: npt.NDArray[Any]) -> float:
    """Largest over mean; 1.0 is perfect balance."""
    mean = float(values.mean()) if len(values) else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


class SplitMasks(Protocol):
    """A graph's split masks (of its target type, on a heterogeneous graph)."""

    @property
    def train_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def val_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def test_mask(self) -> npt.NDArray[np.bool_]: ...


class MetaSource(SplitMasks, Protocol):
    """What a store's META.json record reads of the graph it partitioned."""

    @property
    def name(self) -> str: ...
    @property
    def num_features(self) -> int: ...
    @property
    def num_classes(self) -> int: ...


def meta_record(
    graph: MetaSource,
    n: int,
    e: int,
    und: int,
    offsets: npt.NDArray[Any],
    idx: np.dtype[Any],
    stats: list[PartitionStats],
) -> dict[str, Any]:
    """The META.json record of a homogeneous store (in-memory and out-of-core writers)."""
    k = len(stats)
    edge_cut = sum(s.num_cut_edges for s in stats) // 2
    return {
        "format_version": PARTITION_FORMAT_VERSION,
        "name": graph.name,
        "num_nodes": n,
        "num_edges": e,
        "num_undirected_edges": und,
        "num_features": graph.num_features,
        "num_classes": graph.num_classes,
        "num_partitions": k,
        "offsets": offsets.tolist(),
        "edge_cut": edge_cut,
        "edge_cut_fraction": edge_cut / und if und else 0.0,
        "index_dtype": idx.name,
        "num_train_nodes": int(np.count_nonzero(graph.train_mask)),
        "num_val_nodes": int(np.count_nonzero(graph.val_mask)),
        "num_test_nodes": int(np.count_nonzero(graph.test_mask)),
        "partitions": [s.__dict__ for s in stats],
        "balance": {
            "nodes": balance(np.array([s.num_nodes for s in stats])),
            "train_nodes": balance(np.array([s.num_train for s in stats])),
            "edges": balance(np.array([s.num_edges for s in stats])),
        },
    }


def rows_in_new_ids(
    graph: GraphData,
    olds: npt.NDArray[Any],
    new_of_old: npt.NDArray[Any],
    n: int,
) -> npt.NDArray[Any]:
    """The neighbour lists of old nodes ``olds``, in new ids, each row sorted, concatenated."""
    olds64 = olds.astype(np.int64)
    starts = graph.indptr[olds64]
    lengths = graph.indptr[olds64 + 1] - starts
    vals = new_of_old[graph.indices[_ranges(starts, lengths)]]
    row = np.repeat(np.arange(len(olds), dtype=np.int64), lengths)
    keys = row * np.int64(n) + vals
    del row, vals
    # rows come in order, so only each row's values need sorting: slices of whole rows
    # sort on their own, on all cores (the same result as one keys.sort())
    ends = np.cumsum(lengths)
    targets = np.linspace(0, len(keys), SORT_SLICES + 1)[1:-1]
    cuts = np.searchsorted(ends, targets, side="left") if len(keys) else np.zeros(0, np.int64)
    bounds = [0, *sorted({int(ends[c]) for c in cuts}), len(keys)]
    run_parallel(_sort_slice, [(keys, a, b) for a, b in itertools.pairwise(bounds) if b > a])
    out: npt.NDArray[Any] = (keys % np.int64(n)).astype(new_of_old.dtype)
    return out


def _sort_slice(keys: npt.NDArray[np.int64], a: int, b: int) -> None:
    keys[a:b].sort()
