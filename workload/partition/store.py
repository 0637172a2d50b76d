"""Readers of the on-disk partition store, of either layout (both drawn in
``distgnn_workload.partition``): :class:`PartitionStore` for a homogeneous graph's
(relabelled ids), :class:`HeteroPartitionStore` for a typed graph's (dataset ids).
:meth:`PartitionStore.typed` reads a homogeneous store as the one-type case of a typed one
(:class:`OneTypeStore`), so a layer that reads typed stores reads every store.

Every array is a ``.npy`` file opened with ``mmap_mode="r"`` (:mod:`.store_files`): opening
a store reads only META.json, and a holder touches the pages of the partitions it serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, edge_type_key
from distgnn_workload.data.csr import CSR
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE, GraphData, HeteroGraphData
from distgnn_workload.partition.meta import (
    FEATURES_DIR,
    FEATURES_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    LABELS_FILE,
    MASK_FILES,
    NEW_IDS_FILE,
    NODES_DIR,
    ORIG_IDS_FILE,
    OWNER_DIR,
    PARTITION_BOOK_FILE,
    TOPOLOGY_DIR,
    HeteroPartitionMeta,
    PartitionMeta,
    npy_name,
    one_type_meta,
    part_dir_name,
    read_meta,
)
from distgnn_workload.partition.store_files import StoreFiles


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


class PartitionStore(StoreFiles):
    """A complete partition store on disk; use :meth:`open`."""

    def __init__(self, path: Path, meta: PartitionMeta) -> None:
        super().__init__(path)
        self.meta = meta
        self._offsets = np.asarray(meta.offsets, dtype=np.int64)

    @classmethod
    def open(cls, path: str | Path) -> PartitionStore:
        """Open a store, refusing one that is incomplete or of another format version."""
        path = Path(path)
        return cls(path, PartitionMeta.from_dict(read_meta(path, hetero=False)))

    @property
    def num_partitions(self) -> int:
        return self.meta.num_partitions

    @property
    def offsets(self) -> npt.NDArray[np.int64]:
        return self._offsets

    def topology(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
        """The full CSR in new ids: ``indptr`` int64 [N+1], ``indices`` int32/int64 [E]."""
        return self._load(TOPOLOGY_DIR, INDPTR_FILE), self._load(TOPOLOGY_DIR, INDICES_FILE)

    def partition(self, p: int) -> PartitionData:
        """The arrays of partition ``p``."""
        self._check_partition(p, self.num_partitions)
        d = part_dir_name(p)
        return PartitionData(
            id=p,
            start=int(self._offsets[p]),
            end=int(self._offsets[p + 1]),
            indptr=self._load(d, INDPTR_FILE),
            indices=self._load(d, INDICES_FILE),
            features=self._load(d, FEATURES_FILE),
            labels=self._load(d, LABELS_FILE),
            train_mask=self._load(d, MASK_FILES["train"]),
            val_mask=self._load(d, MASK_FILES["val"]),
            test_mask=self._load(d, MASK_FILES["test"]),
            orig_ids=self._load(d, ORIG_IDS_FILE),
        )

    def partition_of(self, ids: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The partition owning each (new) node id."""
        arr = np.asarray(ids)
        if arr.size and (arr.min() < 0 or arr.max() >= self.meta.num_nodes):
            raise IndexError(f"node ids must lie in [0, {self.meta.num_nodes})")
        return np.searchsorted(self._offsets, arr, side="right").astype(np.int64) - 1

    def orig_ids(self) -> npt.NDArray[Any]:
        """The dataset's id of every new id: ``orig_ids()[new] == orig``."""
        return self._load(ORIG_IDS_FILE)

    def new_ids(self) -> npt.NDArray[Any]:
        """The new id of every dataset id: ``new_ids()[orig] == new``."""
        return self._load(NEW_IDS_FILE)

    def partition_book(self) -> npt.NDArray[np.int32]:
        """The partition of every dataset (original) id."""
        return self._load(PARTITION_BOOK_FILE)

    def to_graph(self) -> GraphData:
        """The whole graph in new ids, read into memory (small graphs, tests, single process)."""
        parts = [self.partition(p) for p in range(self.num_partitions)]
        indptr, indices = self.topology()

        def cat(name: str) -> npt.NDArray[Any]:
            return np.concatenate([np.asarray(getattr(q, name)) for q in parts])

        x = cat("features") if parts else np.zeros((0, self.meta.num_features), dtype=np.float32)
        return GraphData(
            indptr=np.array(indptr),
            indices=np.array(indices),
            x=x.reshape(-1, self.meta.num_features),
            y=cat("labels"),
            train_mask=cat("train_mask"),
            val_mask=cat("val_mask"),
            test_mask=cat("test_mask"),
            num_classes=self.meta.num_classes,
            name=self.meta.name,
        )

    def typed(self) -> HeteroPartitionStore:
        """This store read as the one-type case of a typed store (:class:`OneTypeStore`)."""
        return OneTypeStore(self)

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"PartitionStore({str(self.path)!r}, nodes={m.num_nodes}, edges={m.num_edges}, "
            f"partitions={m.num_partitions}, edge_cut={m.edge_cut})"
        )


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


class HeteroPartitionStore(StoreFiles):
    """A complete typed partition store on disk; use :meth:`open`."""

    def __init__(self, path: Path, meta: HeteroPartitionMeta) -> None:
        super().__init__(path)
        self.meta = meta

    @classmethod
    def open(cls, path: str | Path) -> HeteroPartitionStore:
        """Open a store, refusing one that is incomplete, of another format version or of a
        homogeneous graph."""
        path = Path(path)
        return cls(path, HeteroPartitionMeta.from_dict(read_meta(path, hetero=True)))

    @property
    def num_partitions(self) -> int:
        return self.meta.num_partitions

    def owner(self, node_type: str) -> npt.NDArray[np.int32]:
        """The partition of every node of ``node_type`` (type-local ids)."""
        self._check_type(node_type)
        return self._load(OWNER_DIR, npy_name(node_type))

    def topology(self, edge_type: EdgeType) -> CSR:
        """The whole graph's in-CSR of one edge type."""
        key = edge_type_key(edge_type)
        if key not in self.meta.edge_types:
            raise KeyError(
                f"edge type {key} is not in the store ({', '.join(self.meta.edge_types)})"
            )
        return self._load(TOPOLOGY_DIR, key, INDPTR_FILE), self._load(
            TOPOLOGY_DIR, key, INDICES_FILE
        )

    def partition(self, p: int) -> HeteroPartition:
        """The arrays of partition ``p`` (see :class:`HeteroPartition`)."""
        self._check_partition(p, self.num_partitions)
        m = self.meta
        d = part_dir_name(p)
        return HeteroPartition(
            id=p,
            meta=m,
            nodes={t: self._load(d, NODES_DIR, npy_name(t)) for t in m.node_types},
            owner={t: self.owner(t) for t in m.node_types},
            in_csr={et: self.topology(et) for et in m.edge_type_tuples},
            x={
                t: self._load(d, FEATURES_DIR, npy_name(t))
                for t in m.node_types
                if m.num_features[t] > 0
            },
            y=self._load(d, LABELS_FILE),
            train_mask=self._load(d, MASK_FILES["train"]),
            val_mask=self._load(d, MASK_FILES["val"]),
            test_mask=self._load(d, MASK_FILES["test"]),
        )

    def to_graph(self) -> HeteroGraphData:
        """The whole graph read into memory, rows scattered back to their ids (tests, small
        graphs, a single process)."""
        m = self.meta
        parts = [self.partition(p) for p in range(self.num_partitions)]
        n_target = m.node_counts[m.target_node_type]
        x = {
            t: np.zeros((m.node_counts[t], m.num_features[t]), dtype=np.float32)
            for t in m.node_types
            if m.num_features[t] > 0
        }
        y = np.full(n_target, -1, dtype=np.int64)
        masks = [np.zeros(n_target, dtype=np.bool_) for _ in range(3)]
        for q in parts:
            for t, rows in x.items():
                rows[np.asarray(q.nodes[t])] = q.x[t]
            ids = np.asarray(q.nodes[m.target_node_type])
            y[ids] = q.y
            for mask, part_mask in zip(masks, (q.train_mask, q.val_mask, q.test_mask), strict=True):
                mask[ids] = part_mask
        in_csr = (
            {et: (np.array(ptr), np.array(idx)) for et, (ptr, idx) in parts[0].in_csr.items()}
            if parts
            else {}
        )
        return HeteroGraphData(
            node_counts=dict(m.node_counts),
            in_csr=in_csr,
            x=x,
            target_node_type=m.target_node_type,
            y=y,
            train_mask=masks[0],
            val_mask=masks[1],
            test_mask=masks[2],
            num_classes=m.num_classes,
            name=m.name,
            info=dict(m.extra.get("graph_info", {})),
        )

    def _check_type(self, node_type: str) -> None:
        if node_type not in self.meta.node_types:
            raise KeyError(
                f"node type {node_type!r} is not in the store ({', '.join(self.meta.node_types)})"
            )

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"HeteroPartitionStore({str(self.path)!r}, nodes={m.node_counts}, "
            f"partitions={m.num_partitions}, edge_cut={m.edge_cut})"
        )


class OneTypeStore(HeteroPartitionStore):
    """A homogeneous store read through the typed reader's interface, for the layers that
    read typed stores: node type :data:`NODE_TYPE`, edge type :data:`EDGE_TYPE`, every id a
    new id of the store. Topology, features, labels and splits are the store's own memory
    maps; only each partition's node range and the owner of every node are computed."""

    def __init__(self, store: PartitionStore) -> None:
        super().__init__(store.path, one_type_meta(store.meta))
        self.store = store

    def owner(self, node_type: str) -> npt.NDArray[np.int32]:
        self._check_type(node_type)
        return np.repeat(
            np.arange(self.num_partitions, dtype=np.int32), np.diff(self.store.offsets)
        )

    def topology(self, edge_type: EdgeType) -> CSR:
        if edge_type != EDGE_TYPE:
            raise KeyError(f"edge type {edge_type_key(edge_type)} is not in the store")
        return self.store.topology()

    def partition(self, p: int) -> HeteroPartition:
        part = self.store.partition(p)
        idx = np.dtype(self.store.meta.index_dtype)
        return HeteroPartition(
            id=p,
            meta=self.meta,
            nodes={NODE_TYPE: np.arange(part.start, part.end, dtype=idx)},
            owner={NODE_TYPE: self.owner(NODE_TYPE)},
            in_csr={EDGE_TYPE: self.topology(EDGE_TYPE)},
            x={NODE_TYPE: part.features} if self.meta.num_features[NODE_TYPE] > 0 else {},
            y=part.labels,
            train_mask=part.train_mask,
            val_mask=part.val_mask,
            test_mask=part.test_mask,
        )


def load_hetero_partition(store_dir: str | Path, partition: int) -> HeteroPartition:
    """Open the typed store at ``store_dir`` and return partition ``partition``.

    Raises :class:`StoreError` for a missing, incomplete, homogeneous or other-version store,
    and IndexError for a partition out of range.
    """
    return HeteroPartitionStore.open(store_dir).partition(partition)
