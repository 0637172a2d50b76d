"""The typed partition store of a heterogeneous graph, and its reader.

Ids are never relabelled: a node is ``(node_type, i)`` with ``i`` its type-local id in the
dataset (``0 .. n_t - 1``), in the store as in :class:`HeteroGraphData`. Edge types are
written ``src__rel__dst`` in paths and META.json (reverse relations included, as the loader
added them). ``F_t`` is the feature width of type t; ``n_{p,t}`` the nodes of type t that
partition p owns; ``idx_t`` is int32 when n_t < 2^31, else int64::

    <data>/partitions/<key>/
    ├── META.json                     graph_kind "hetero", format_version, key, algorithm,
    │                                 node types and counts, per-type id ranges of the
    │                                 homogeneous view, edge types and counts, per-partition
    │                                 per-type counts, edge cut, balance, specs, timings
    ├── owner/<node_type>.npy         int32 [n_t]         partition of each typed node
    ├── topology/<src__rel__dst>/
    │   ├── indptr.npy                int64 [n_dst + 1]   the WHOLE graph's in-CSR (replicated)
    │   └── indices.npy               idx_src [E_et]      source ids, rows sorted, no duplicates
    ├── part-<p>/
    │   ├── nodes/<node_type>.npy     idx_t [n_{p,t}]     owned type-local ids, ascending
    │   ├── features/<node_type>.npy  float32 [n_{p,t}, F_t]  owned rows, in nodes/ order;
    │   │                             only for the types that have features
    │   ├── labels.npy                int64 [n_{p,target}]    target type, in nodes/ order
    │   ├── train_mask.npy            bool  [n_{p,target}]
    │   ├── val_mask.npy              bool  [n_{p,target}]
    │   └── test_mask.npy             bool  [n_{p,target}]
    └── _SUCCESS                      written last: the store is complete

The homogeneous view (what METIS partitions) stacks the types in ``node_types`` order:
typed node ``(t, i)`` is ``type_offsets[t] + i``. Topology is replicated (one copy on the
volume, memory-mapped by every reader); features, labels and splits are split by owner.
A store is written in a temporary sibling directory and published with one rename, as the
homogeneous store is (:mod:`.writer`). Readers check ``_SUCCESS``, the format version and
the graph kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, edge_type_key, parse_edge_type_key
from distgnn_workload.data.csr import CSR
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.partition.store import (
    GRAPH_KIND_HETERO,
    GRAPH_KIND_KEY,
    INDICES_FILE,
    INDPTR_FILE,
    LABELS_FILE,
    MASK_FILES,
    META_FILE,
    TOPOLOGY_DIR,
    MetaRecord,
    StoreError,
    is_complete,
    part_dir_name,
    read_meta,
)

OWNER_DIR = "owner"
NODES_DIR = "nodes"
FEATURES_DIR = "features"


def npy_name(name: str) -> str:
    return f"{name}.npy"


@dataclass(frozen=True)
class HeteroPartitionStats:
    """Figures of one partition, as kept in META.json."""

    id: int
    num_nodes: dict[str, int]
    """Owned nodes per node type."""
    num_in_edges: dict[str, int]
    """Per edge type key: stored edges whose destination this partition owns."""
    num_train: int
    num_val: int
    num_test: int
    """Owned target nodes in each split."""
    num_cut_edges: int
    """In-edges of owned nodes (all edge types) whose source another partition owns."""
    num_halo_nodes: dict[str, int]
    """Per node type: distinct nodes of other partitions that are the source of an in-edge."""


@dataclass(frozen=True)
class HeteroPartitionMeta(MetaRecord):
    """META.json of a typed store."""

    STATS: ClassVar[type] = HeteroPartitionStats

    format_version: int
    graph_kind: str
    key: str | None
    name: str
    algorithm: str
    num_partitions: int
    node_types: list[str]
    node_counts: dict[str, int]
    type_offsets: dict[str, int]
    """Homogeneous view: typed node (t, i) is ``type_offsets[t] + i``."""
    edge_types: list[str]
    """Edge type keys ``src__rel__dst``, in the graph's order (reverses included)."""
    edge_counts: dict[str, int]
    num_features: dict[str, int]
    """Feature width per node type; 0 for a featureless type."""
    target_node_type: str
    num_classes: int
    num_train_nodes: int
    num_val_nodes: int
    num_test_nodes: int
    edge_cut: int
    """Stored typed edges (all edge types, reverses included) whose ends lie in different
    partitions."""
    edge_cut_fraction: float
    """``edge_cut`` over all stored typed edges."""
    edge_cut_by_type: dict[str, int]
    partitions: list[HeteroPartitionStats]
    balance: dict[str, float]
    """Largest partition over the mean: ``nodes:<type>`` per type, ``train_nodes``,
    ``edges`` (owned in-edges); 1.0 is perfect."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Everything else in META.json: dataset and partition specs, step timings, graph info."""

    @property
    def edge_type_tuples(self) -> list[EdgeType]:
        return [parse_edge_type_key(k) for k in self.edge_types]


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


def is_hetero_store(path: str | Path) -> bool:
    """True when ``path`` holds a complete store of a heterogeneous graph."""
    path = Path(path)
    if not is_complete(path):
        return False
    try:
        data = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return False
    return bool(data.get(GRAPH_KIND_KEY) == GRAPH_KIND_HETERO)


class HeteroPartitionStore:
    """A complete typed partition store on disk; use :meth:`open`."""

    def __init__(self, path: Path, meta: HeteroPartitionMeta) -> None:
        self.path = path
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

    def _load(self, *parts: str) -> npt.NDArray[Any]:
        file = self.path.joinpath(*parts)
        try:
            return np.load(file, mmap_mode="r")  # type: ignore[no-any-return]
        except (OSError, ValueError) as err:
            raise StoreError(
                f"{file} is missing, truncated or unreadable ({err}); delete {self.path} "
                "to partition again"
            ) from None

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
        if not 0 <= p < self.num_partitions:
            raise IndexError(f"partition {p} out of range [0, {self.num_partitions})")
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


def load_hetero_partition(store_dir: str | Path, partition: int) -> HeteroPartition:
    """Open the typed store at ``store_dir`` and return partition ``partition``.

    Raises :class:`StoreError` for a missing, incomplete, homogeneous or other-version store,
    and IndexError for a partition out of range.
    """
    return HeteroPartitionStore.open(store_dir).partition(partition)
