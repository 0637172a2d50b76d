"""Reader of the on-disk partition store (the format is drawn in ``distgnn_workload.partition``).

Every array is a ``.npy`` file opened with ``mmap_mode="r"``: opening a store reads only
META.json, and a holder touches the pages of the partitions it serves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import PARTITION_FORMAT_VERSION, SUCCESS_MARKER
from distgnn_workload.data.graph import GraphData

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
"""META.json's key telling a typed store (:mod:`.hetero_store`) from this one (absent here)."""
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
            "HeteroPartitionStore (distgnn_workload.partition.hetero_store)"
        )
    if hetero and not typed:
        raise StoreError(
            f"{path} holds a homogeneous graph's partitions, not a heterogeneous one's; "
            "open it with PartitionStore"
        )
    return data


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


def is_complete(path: str | Path) -> bool:
    """True when a store exists at ``path`` and was completely written."""
    return (Path(path) / SUCCESS_MARKER).is_file()


class PartitionStore:
    """A complete partition store on disk; use :meth:`open`."""

    def __init__(self, path: Path, meta: PartitionMeta) -> None:
        self.path = path
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

    def _load(self, *parts: str) -> npt.NDArray[Any]:
        file = self.path.joinpath(*parts)
        try:
            return np.load(file, mmap_mode="r")  # type: ignore[no-any-return]
        except (OSError, ValueError) as err:
            # A truncated file makes mmap raise ValueError ("mmap length is greater than file size").
            raise StoreError(
                f"{file} is missing, truncated or unreadable ({err}); delete {self.path} "
                "to partition again"
            ) from None

    def topology(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
        """The full CSR in new ids: ``indptr`` int64 [N+1], ``indices`` int32/int64 [E]."""
        return self._load(TOPOLOGY_DIR, INDPTR_FILE), self._load(TOPOLOGY_DIR, INDICES_FILE)

    def partition(self, p: int) -> PartitionData:
        """The arrays of partition ``p``."""
        if not 0 <= p < self.num_partitions:
            raise IndexError(f"partition {p} out of range [0, {self.num_partitions})")
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

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"PartitionStore({str(self.path)!r}, nodes={m.num_nodes}, edges={m.num_edges}, "
            f"partitions={m.num_partitions}, edge_cut={m.edge_cut})"
        )
