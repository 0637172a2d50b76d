"""What one partition of a store holds, as the readers (:mod:`.store`) hand it out:
:class:`PartitionData` for a homogeneous store's partition (new ids), :class:`HeteroPartition`
for a typed store's, or any store read as a typed one (dataset ids, type-local). The arrays
are the store's memory maps; :meth:`HeteroPartition.split_ids` and
:meth:`HeteroPartition.local_in_csr` derive the views a holder serves from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.csr import CSR
from distgnn_workload.partition.meta import HeteroPartitionMeta


@dataclass(frozen=True)
class PartitionData:
    """One partition's arrays (memory-mapped). Row i of the CSR is the node ``start + i``."""

    id: int
    start: int
    end: int
    indptr: npt.NDArray[np.int64]
    """[n_p + 1], starting at 0, indexing ``indices``."""
    indices: npt.NDArray[Any]
    """Neighbours of the owned nodes, as global new ids."""
    features: npt.NDArray[np.float32]
    labels: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]
    orig_ids: npt.NDArray[Any]
    """The dataset's id of each owned node."""

    @property
    def num_nodes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class HeteroPartition:
    """What one partition's holder reads: its owned typed nodes with their rows, the owner of
    every typed node, and the whole typed topology. Arrays are memory-mapped, read-only.

    Every id is a type-local dataset id. ``nodes[t]`` lists the nodes of type t this
    partition owns, ascending; row i of ``x[t]`` is the features of ``nodes[t][i]`` (only
    types with features have an entry); ``y`` and the masks are aligned with
    ``nodes[target_node_type]`` (-1: no label). ``owner[t][i]`` is the partition owning
    ``(t, i)``, for every node of every type. ``in_csr[et]`` is the whole graph's
    destination-indexed CSR, as in :attr:`HeteroGraphData.in_csr` (replicated, not only
    this partition's in-edges; :meth:`local_in_csr` slices the owned rows).
    """

    id: int
    meta: HeteroPartitionMeta
    nodes: dict[str, npt.NDArray[Any]]
    owner: dict[str, npt.NDArray[np.int32]]
    in_csr: dict[EdgeType, CSR]
    x: dict[str, npt.NDArray[np.float32]]
    y: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]

    @property
    def node_types(self) -> list[str]:
        return list(self.meta.node_types)

    @property
    def edge_types(self) -> list[EdgeType]:
        return self.meta.edge_type_tuples

    @property
    def node_counts(self) -> dict[str, int]:
        """Nodes of each type in the whole graph."""
        return dict(self.meta.node_counts)

    @property
    def target_node_type(self) -> str:
        return self.meta.target_node_type

    @property
    def num_classes(self) -> int:
        return self.meta.num_classes

    def split_ids(self, split: str) -> npt.NDArray[np.int64]:
        """Owned target-type ids in ``split`` (train, val or test), ascending."""
        mask = {"train": self.train_mask, "val": self.val_mask, "test": self.test_mask}[split]
        return np.asarray(self.nodes[self.target_node_type])[np.asarray(mask)].astype(np.int64)

    def local_in_csr(self, edge_type: EdgeType) -> CSR:
        """In-edges of the owned ``dst`` nodes: row i is ``nodes[dst][i]``'s sources (global
        type-local ids, so they may name halo nodes; ``owner`` tells whose they are)."""
        indptr, indices = self.in_csr[edge_type]
        rows = np.asarray(self.nodes[edge_type[2]], dtype=np.int64)
        starts = np.asarray(indptr[rows])
        lengths = np.asarray(indptr[rows + 1]) - starts
        out_ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=out_ptr[1:])
        total = int(out_ptr[-1])
        pos = np.repeat(starts - out_ptr[:-1], lengths) + np.arange(total, dtype=np.int64)
        return out_ptr, np.asarray(indices)[pos]
