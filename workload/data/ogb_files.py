"""OGB's raw download layout, shared by the node-, link- and heterogeneous-property loaders.

Every OGB dataset unpacks to ``raw/`` (gzip or plain CSV tables) and ``split/<scheme>/``.
This module finds their files, reads the optional single-graph counts, picks the split
scheme, and reads the homogeneous feature and edge tables with the checks the loaders share;
each error names the file (and the line) and says how to fix it.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csv_files import find_csv, read_csv
from distgnn_workload.data.errors import DatasetError

RAW_DIR = "raw"
SPLIT_DIR = "split"
DOWNLOAD_HINT = (
    "download the dataset and unpack it so that raw/ and split/ sit under dataset.ogb.path"
)


def required(folder: Path, stem: str, hint: str) -> Path:
    """``<stem>.csv.gz`` (or ``.csv``) in ``folder``; its absence is an error ending in ``hint``."""
    path = find_csv(folder, stem)
    if path is None:
        raise DatasetError(f"{stem}.csv.gz is missing; {hint}", source=folder)
    return path


def single_count(folder: Path, stem: str) -> int | None:
    """The one count of an optional ``num-*-list`` table, or None where it is absent."""
    path = find_csv(folder, stem)
    if path is None:
        return None
    counts = read_csv(path, np.int64, columns=1)
    if len(counts) != 1:
        raise DatasetError(
            f"lists {len(counts)} graphs; only single-graph (node property) datasets are supported",
            source=path,
        )
    return int(counts[0, 0])


def first_bad_row(bad: Any) -> int:
    """The index of the first True of a mask."""
    return int(np.flatnonzero(bad)[0])


def raw_dir(root: Path) -> Path:
    """``root/raw`` of a dataset folder; a ``root`` that is no folder is an error."""
    if not root.is_dir():
        raise DatasetError(
            "is not a directory; dataset.ogb.path must name the dataset folder that holds "
            "raw/ and split/",
            source=root,
        )
    return root / RAW_DIR


@dataclass(frozen=True)
class RawTables:
    """The graph's tables in ``raw/``, and the counts its ``num-*-list`` tables declare."""

    folder: Path
    edges: Path
    features: Path
    declared_nodes: int | None
    declared_edges: int | None


def raw_tables(root: Path) -> RawTables:
    """The edge and feature tables of a dataset folder (both required) and the declared counts."""
    raw = raw_dir(root)
    edges = required(raw, "edge", DOWNLOAD_HINT)
    features = required(raw, "node-feat", DOWNLOAD_HINT)
    return RawTables(
        folder=raw,
        edges=edges,
        features=features,
        declared_nodes=single_count(raw, "num-node-list"),
        declared_edges=single_count(raw, "num-edge-list"),
    )


def split_scheme_dir(root: Path, scheme: str | None) -> Path:
    """The split folder to use: the named scheme, or the only one there is."""
    split_root = root / SPLIT_DIR
    schemes = (
        sorted(p.name for p in split_root.iterdir() if p.is_dir()) if split_root.is_dir() else []
    )
    if scheme is not None:
        if scheme not in schemes:
            raise DatasetError(
                f"split scheme {scheme!r} not found; dataset.ogb.splitScheme must be one of "
                f"{', '.join(schemes) or '(none: split/ has no folders)'}",
                source=split_root,
            )
        return split_root / scheme
    if not schemes:
        raise DatasetError(
            "no split scheme: expected split/<scheme>/{train,valid,test}.csv.gz", source=root
        )
    if len(schemes) > 1:
        raise DatasetError(
            f"holds several split schemes ({', '.join(schemes)}); set dataset.ogb.splitScheme "
            "to the one to train with",
            source=split_root,
        )
    return split_root / schemes[0]


def read_features(path: Path, declared_nodes: int | None) -> npt.NDArray[np.float32]:
    """The ``node-feat`` table: one finite row per node (``num-node-list``'s count if given)."""
    x = read_csv(path, np.float32)
    n = declared_nodes if declared_nodes is not None else len(x)
    if len(x) != n:
        raise DatasetError(
            f"has {len(x)} rows but the graph has {n} nodes (num-node-list); "
            "each node needs one feature row",
            source=path,
        )
    if not np.all(np.isfinite(x)):
        row = first_bad_row(~np.isfinite(x).all(axis=1))
        raise DatasetError("holds a NaN or infinite feature", source=path, line=row + 1)
    return x


def read_edges(path: Path, n: int, declared_edges: int | None) -> npt.NDArray[np.int64]:
    """The ``edge`` table as ``[E, 2]`` node ids in ``[0, n)``, as many as ``num-edge-list``
    says where given."""
    edges = read_csv(path, np.int64, columns=2)
    bad = (edges < 0) | (edges >= n)
    if bad.any():
        row = first_bad_row(bad.any(axis=1))
        raise DatasetError(
            f"edge ({edges[row, 0]}, {edges[row, 1]}) refers to a node outside [0, {n}): "
            f"the graph has {n} nodes",
            source=path,
            line=row + 1,
        )
    if declared_edges is not None and len(edges) != declared_edges:
        raise DatasetError(
            f"has {len(edges)} edges but num-edge-list says {declared_edges}", source=path
        )
    return edges


def write_csv_gz(path: Path, rows: npt.NDArray[Any], fmt: str) -> None:
    """Write a gzip CSV table as OGB ships them (for the writers of tests and examples)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        np.savetxt(f, rows, fmt=fmt, delimiter=",")


def write_raw_graph(
    root: Path, edges: npt.NDArray[Any], x: npt.NDArray[Any], scheme: str
) -> tuple[Path, Path]:
    """Write the edge, feature and count tables of a homogeneous OGB dataset under ``root``
    (for the writers of tests and examples); returns its raw and split-scheme folders."""
    raw = root / RAW_DIR
    split_dir = root / SPLIT_DIR / scheme
    raw.mkdir(parents=True, exist_ok=True)
    split_dir.mkdir(parents=True, exist_ok=True)
    write_csv_gz(raw / "edge.csv.gz", np.asarray(edges).reshape(-1, 2), "%d")
    write_csv_gz(raw / "node-feat.csv.gz", np.asarray(x).reshape(len(x), -1), "%.9g")
    write_csv_gz(raw / "num-node-list.csv.gz", np.array([[len(x)]]), "%d")
    write_csv_gz(raw / "num-edge-list.csv.gz", np.array([[len(edges)]]), "%d")
    return raw, split_dir
