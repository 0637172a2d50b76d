"""META.json of a partition store, and the names of its files: what every reader and
writer of either layout (:mod:`distgnn_workload.partition` draws both) shares. A complete
store is checked before it is read: its ``_SUCCESS`` marker, its format version and its
graph kind (typed or homogeneous).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from distgnn_api.contract import PARTITION_FORMAT_VERSION, SUCCESS_MARKER
from distgnn_api.edge_types import EdgeType, edge_type_key, parse_edge_type_key
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE

META_FILE = "META.json"
TOPOLOGY_DIR = "topology"
INDPTR_FILE = "indptr.npy"
INDICES_FILE = "indices.npy"
ORIG_IDS_FILE = "orig_ids.npy"
NEW_IDS_FILE = "new_ids.npy"
PARTITION_BOOK_FILE = "partition_book.npy"
FEATURES_FILE = "features.npy"
LABELS_FILE = "labels.npy"
MASK_FILES = {"train": "train_mask.npy", "val": "val_mask.npy", "test": "test_mask.npy"}
GRAPH_KIND_KEY = "graph_kind"
"""META.json's key telling a typed store from a homogeneous one (absent there)."""
GRAPH_KIND_HETERO = "hetero"


def part_dir_name(p: int) -> str:
    """Folder of partition p inside a store."""
    return f"part-{p}"


class StoreError(RuntimeError):
    """A partition store that is missing, incomplete or of another format version."""


def read_meta(path: Path, *, hetero: bool) -> dict[str, Any]:
    """A complete store's META.json, refusing a missing or incomplete store, another format
    version, or a store of the other kind of graph (typed or not)."""
    if not path.is_dir():
        raise StoreError(f"no partition store at {path}: the partition step has not run")
    if not is_complete(path):
        raise StoreError(
            f"partition store {path} has no {SUCCESS_MARKER} marker: it is incomplete "
            "(a partitioner crashed or is still writing); rerun the partition step"
        )
    try:
        data: dict[str, Any] = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError) as err:
        raise StoreError(f"{path / META_FILE} is unreadable: {err}") from None
    version = data.get("format_version")
    if version != PARTITION_FORMAT_VERSION:
        raise StoreError(
            f"{path / META_FILE}: format_version {version!r}, this reader needs "
            f"{PARTITION_FORMAT_VERSION}; repartition with this version"
        )
    typed = data.get(GRAPH_KIND_KEY) == GRAPH_KIND_HETERO
    if typed and not hetero:
        raise StoreError(
            f"{path} holds a heterogeneous graph's typed partitions; open it with "
            "HeteroPartitionStore (distgnn_workload.partition.store)"
        )
    if hetero and not typed:
        raise StoreError(
            f"{path} holds a homogeneous graph's partitions, not a heterogeneous one's; "
            "open it with PartitionStore"
        )
    return data


OWNER_DIR = "owner"
NODES_DIR = "nodes"
FEATURES_DIR = "features"


def npy_name(name: str) -> str:
    return f"{name}.npy"


def is_complete(path: str | Path) -> bool:
    """True when a store exists at ``path`` and was completely written."""
    return (Path(path) / SUCCESS_MARKER).is_file()


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


class MetaRecord:
    """META.json as a dataclass: its named fields, ``partitions`` (one ``STATS`` record each)
    and ``extra`` (every other key, kept as it was)."""

    STATS: ClassVar[type]
    partitions: list[Any]
    extra: dict[str, Any]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = {f.name for f in fields(cls)} - {"partitions", "extra"}  # type: ignore[arg-type]
        missing = sorted(known - data.keys())
        if missing:
            raise StoreError(f"{META_FILE} lacks {', '.join(missing)}")
        values: dict[str, Any] = {k: data[k] for k in known}
        values["partitions"] = [cls.STATS(**p) for p in data["partitions"]]
        values["extra"] = {k: v for k, v in data.items() if k not in known and k != "partitions"}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        names = {f.name for f in fields(self)} - {"partitions", "extra"}  # type: ignore[arg-type]
        out: dict[str, Any] = {k: getattr(self, k) for k in names}
        out["partitions"] = [p.__dict__ for p in self.partitions]
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class PartitionStats:
    """Figures of one partition, as kept in META.json."""

    id: int
    start: int
    end: int
    num_nodes: int
    num_edges: int
    """Directed edges in the partition's CSR (edges out of its owned nodes)."""
    num_train: int
    num_val: int
    num_test: int
    num_cut_edges: int
    """Directed edges from an owned node to a node of another partition."""
    num_halo_nodes: int
    """Distinct nodes of other partitions adjacent to an owned node."""


@dataclass(frozen=True)
class PartitionMeta(MetaRecord):
    """META.json of a store."""

    STATS: ClassVar[type] = PartitionStats

    format_version: int
    key: str | None
    name: str
    num_nodes: int
    num_edges: int
    """Stored directed edges (each undirected edge twice), as in PyG's ``num_edges``."""
    num_undirected_edges: int
    num_features: int
    num_classes: int
    num_partitions: int
    offsets: list[int]
    """Partition p owns the new ids [offsets[p], offsets[p+1])."""
    edge_cut: int
    """Undirected edges whose endpoints lie in different partitions."""
    edge_cut_fraction: float
    algorithm: str
    index_dtype: str
    num_train_nodes: int
    num_val_nodes: int
    num_test_nodes: int
    partitions: list[PartitionStats]
    balance: dict[str, float]
    """Largest partition over the mean, for nodes, train_nodes and edges (1.0 is perfect)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Everything else in META.json: dataset and partition specs, step timings, graph info."""


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


def one_type_meta(meta: PartitionMeta) -> HeteroPartitionMeta:
    """A homogeneous store's META.json as the one-type case of a typed store's: node type
    :data:`~distgnn_workload.data.graph.NODE_TYPE`, edge type
    :data:`~distgnn_workload.data.graph.EDGE_TYPE` (both directions of every edge, so the
    typed edge cut counts each cut undirected edge twice, as a typed store does)."""
    t, key = NODE_TYPE, edge_type_key(EDGE_TYPE)
    cut = sum(s.num_cut_edges for s in meta.partitions)
    balance = {f"nodes:{t}" if name == "nodes" else name: v for name, v in meta.balance.items()}
    return HeteroPartitionMeta.from_dict(
        {
            **meta.extra,
            "format_version": meta.format_version,
            GRAPH_KIND_KEY: GRAPH_KIND_HETERO,
            "key": meta.key,
            "name": meta.name,
            "algorithm": meta.algorithm,
            "num_partitions": meta.num_partitions,
            "node_types": [t],
            "node_counts": {t: meta.num_nodes},
            "type_offsets": {t: 0},
            "edge_types": [key],
            "edge_counts": {key: meta.num_edges},
            "num_features": {t: meta.num_features},
            "target_node_type": t,
            "num_classes": meta.num_classes,
            "num_train_nodes": meta.num_train_nodes,
            "num_val_nodes": meta.num_val_nodes,
            "num_test_nodes": meta.num_test_nodes,
            "edge_cut": cut,
            "edge_cut_fraction": cut / meta.num_edges if meta.num_edges else 0.0,
            "edge_cut_by_type": {key: cut},
            "partitions": [
                {
                    "id": s.id,
                    "num_nodes": {t: s.num_nodes},
                    "num_in_edges": {key: s.num_edges},
                    "num_train": s.num_train,
                    "num_val": s.num_val,
                    "num_test": s.num_test,
                    "num_cut_edges": s.num_cut_edges,
                    "num_halo_nodes": {t: s.num_halo_nodes},
                }
                for s in meta.partitions
            ],
            "balance": balance,
        }
    )
