"""The figures a store writer (:mod:`.writer`) counts and records beside the arrays: the
distinct halo nodes of each partition, of one node type (:class:`_HaloSet`), and the
META.json graph part of a typed store (:func:`typed_meta_record`; a relabelled store's is
:func:`.relabel.meta_record`): counts, edge cut and balance, per partition and in all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import PARTITION_FORMAT_VERSION
from distgnn_api.edge_types import edge_type_key
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.partition import algorithms
from distgnn_workload.partition.meta import GRAPH_KIND_HETERO, GRAPH_KIND_KEY, HeteroPartitionStats
from distgnn_workload.partition.relabel import balance


class _HaloSet:
    """Distinct (partition, node) pairs of one node type, as keys ``p * n + node``: a bitmap
    when k * n is small enough, else sorted unique keys merged at the end."""

    BITMAP_MAX = 1 << 28

    def __init__(self, k: int, n: int) -> None:
        self.k, self.n = k, max(1, n)
        self.bitmap = np.zeros(k * n, dtype=np.bool_) if k * n <= self.BITMAP_MAX else None
        self.keys: list[npt.NDArray[np.int64]] = []

    def add(self, keys: npt.NDArray[np.int64]) -> None:
        if self.bitmap is not None:
            self.bitmap[keys] = True
        else:
            self.keys.append(np.unique(keys))

    def per_partition(self) -> npt.NDArray[np.int64]:
        """Distinct nodes per partition."""
        if self.bitmap is not None:
            found = np.flatnonzero(self.bitmap)
        else:
            found = np.unique(np.concatenate(self.keys)) if self.keys else np.zeros(0, np.int64)
        return np.bincount(found // np.int64(self.n), minlength=self.k).astype(np.int64)


def typed_meta_record(
    graph: HeteroGraphData,
    k: int,
    stats: list[HeteroPartitionStats],
    cut_by_type: dict[str, int],
) -> dict[str, Any]:
    """META.json's graph part of the typed store of ``graph`` in ``k`` partitions, from each
    partition's figures and the cut edges of each edge type (keyed ``src__rel__dst``)."""
    target = graph.target_node_type
    edge_cut = sum(cut_by_type.values())
    stored = graph.num_edges()
    offsets = algorithms.type_offsets(graph)
    owned_edges = np.array([sum(s.num_in_edges.values()) for s in stats])
    bal = {
        f"nodes:{nt}": balance(np.array([s.num_nodes[nt] for s in stats]))
        for nt in graph.node_types
    }
    bal["train_nodes"] = balance(np.array([s.num_train for s in stats]))
    bal["edges"] = balance(owned_edges)
    return {
        "format_version": PARTITION_FORMAT_VERSION,
        GRAPH_KIND_KEY: GRAPH_KIND_HETERO,
        "name": graph.name,
        "num_partitions": k,
        "node_types": graph.node_types,
        "node_counts": dict(graph.node_counts),
        "type_offsets": offsets,
        "edge_types": [edge_type_key(et) for et in graph.edge_types],
        "edge_counts": {edge_type_key(et): graph.num_edges(et) for et in graph.edge_types},
        "num_features": {nt: graph.num_features(nt) for nt in graph.node_types},
        "target_node_type": target,
        "num_classes": graph.num_classes,
        "num_train_nodes": int(np.count_nonzero(graph.train_mask)),
        "num_val_nodes": int(np.count_nonzero(graph.val_mask)),
        "num_test_nodes": int(np.count_nonzero(graph.test_mask)),
        "edge_cut": edge_cut,
        "edge_cut_fraction": edge_cut / stored if stored else 0.0,
        "edge_cut_by_type": cut_by_type,
        "partitions": [s.__dict__ for s in stats],
        "balance": bal,
    }
