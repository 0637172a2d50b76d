"""Loader of an OGB node-property dataset in its raw format, as OGB's downloads unpack it::

    <dataset>/
    ├── raw/
    │   ├── edge.csv.gz            "src,dst" per line, node ids from 0 (one direction suffices)
    │   ├── node-feat.csv.gz       F comma-separated floats per node, in node order
    │   ├── node-label.csv.gz      one integer class per node, in node order
    │   ├── num-node-list.csv.gz   optional: the node count
    │   └── num-edge-list.csv.gz   optional: the edge count (lines of edge.csv.gz)
    └── split/<scheme>/
        ├── train.csv.gz           one node id per line
        ├── valid.csv.gz
        └── test.csv.gz

Uncompressed ``.csv`` files are accepted as well. The graph is made undirected; duplicate
edges and self-loops are dropped (and counted in the graph's info).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csv_files import find_csv, read_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, csr_from_edges

log = logging.getLogger(__name__)

RAW_DIR = "raw"
SPLIT_DIR = "split"
SPLIT_FILES = {"train": "train", "val": "valid", "test": "test"}
MAX_CLASSES = 10_000
"""Labels above this are taken for a corrupt file, not for a real class count."""

ProgressFn = Callable[[float], None]


def _required(folder: Path, stem: str, hint: str) -> Path:
    path = find_csv(folder, stem)
    if path is None:
        raise DatasetError(f"{stem}.csv.gz is missing; {hint}", source=folder)
    return path


def _single_count(folder: Path, stem: str) -> int | None:
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


def _first_bad_row(bad: Any) -> int:
    return int(np.flatnonzero(bad)[0])


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


def load_ogb(
    root: str | Path,
    split_scheme: str | None = None,
    *,
    num_classes: int | None = None,
    progress: ProgressFn | None = None,
) -> GraphData:
    """Load an OGB raw dataset directory; ``num_classes`` None infers it from the labels."""
    root = Path(root)
    report = progress or (lambda _: None)
    if not root.is_dir():
        raise DatasetError(
            "is not a directory; dataset.ogb.path must name the dataset folder that holds "
            "raw/ and split/",
            source=root,
        )
    raw = root / RAW_DIR
    hint = "download the dataset and unpack it so that raw/ and split/ sit under dataset.ogb.path"
    edge_file = _required(raw, "edge", hint)
    feat_file = _required(raw, "node-feat", hint)
    label_file = _required(raw, "node-label", hint)
    split_dir = split_scheme_dir(root, split_scheme)
    split_paths = {name: _required(split_dir, stem, hint) for name, stem in SPLIT_FILES.items()}

    declared_nodes = _single_count(raw, "num-node-list")
    declared_edges = _single_count(raw, "num-edge-list")

    x = read_csv(feat_file, np.float32)
    report(0.3)
    n = declared_nodes if declared_nodes is not None else len(x)
    if len(x) != n:
        raise DatasetError(
            f"has {len(x)} rows but the graph has {n} nodes (num-node-list); "
            "each node needs one feature row",
            source=feat_file,
        )
    if not np.all(np.isfinite(x)):
        row = _first_bad_row(~np.isfinite(x).all(axis=1))
        raise DatasetError("holds a NaN or infinite feature", source=feat_file, line=row + 1)

    y = _labels(label_file, n, num_classes)
    report(0.4)

    edges = read_csv(edge_file, np.int64, columns=2)
    report(0.7)
    bad = (edges < 0) | (edges >= n)
    if bad.any():
        row = _first_bad_row(bad.any(axis=1))
        raise DatasetError(
            f"edge ({edges[row, 0]}, {edges[row, 1]}) refers to a node outside [0, {n}): "
            f"the graph has {n} nodes",
            source=edge_file,
            line=row + 1,
        )
    if declared_edges is not None and len(edges) != declared_edges:
        raise DatasetError(
            f"has {len(edges)} edges but num-edge-list says {declared_edges}", source=edge_file
        )
    masks = _split_masks(split_paths, n)
    report(0.8)
    indptr, indices, info = csr_from_edges(edges[:, 0], edges[:, 1], n)
    del edges
    report(1.0)
    graph = GraphData(
        indptr=indptr,
        indices=indices,
        x=x,
        y=y,
        train_mask=masks["train"],
        val_mask=masks["val"],
        test_mask=masks["test"],
        num_classes=num_classes if num_classes is not None else int(y.max(initial=-1)) + 1,
        name=root.name,
        info={**info, "split_scheme": split_dir.name},
    )
    graph.validate()
    return graph


def _labels(path: Path, n: int, num_classes: int | None) -> npt.NDArray[np.int64]:
    labels = read_csv(path, np.int64, columns=1)
    if len(labels) != n:
        raise DatasetError(
            f"has {len(labels)} labels but the graph has {n} nodes; each node needs one label",
            source=path,
        )
    y = labels[:, 0]
    if n and y.min() < 0:
        row = _first_bad_row(y < 0)
        raise DatasetError(
            f"label {y[row]} is negative; classes are numbered from 0", source=path, line=row + 1
        )
    limit = num_classes if num_classes is not None else MAX_CLASSES
    if n and y.max() >= limit:
        row = _first_bad_row(y >= limit)
        what = f"num_classes={num_classes}" if num_classes is not None else f"{MAX_CLASSES} classes"
        raise DatasetError(
            f"label {y[row]} is out of range: at most {what} (labels 0..{limit - 1})",
            source=path,
            line=row + 1,
        )
    return y


def _split_masks(paths: dict[str, Path], n: int) -> dict[str, npt.NDArray[np.bool_]]:
    masks: dict[str, npt.NDArray[np.bool_]] = {}
    owner = np.full(n, -1, dtype=np.int8)
    for i, (name, path) in enumerate(paths.items()):
        ids = read_csv(path, np.int64, columns=1)[:, 0]
        bad = (ids < 0) | (ids >= n)
        if bad.any():
            row = _first_bad_row(bad)
            raise DatasetError(
                f"node id {ids[row]} is outside [0, {n}): the graph has {n} nodes",
                source=path,
                line=row + 1,
            )
        taken = owner[ids] >= 0
        if taken.any():
            row = _first_bad_row(taken)
            other = list(paths)[owner[ids[row]]]
            raise DatasetError(
                f"node {ids[row]} is also in the {other} split ({paths[other].name}); "
                "splits must be disjoint",
                source=path,
                line=row + 1,
            )
        owner[ids] = i
        mask = np.zeros(n, dtype=np.bool_)
        mask[ids] = True
        masks[name] = mask
    return masks


def write_ogb(
    root: str | Path,
    edges: npt.NDArray[Any],
    x: npt.NDArray[Any],
    y: npt.NDArray[Any],
    splits: dict[str, npt.NDArray[Any]],
    *,
    scheme: str = "random",
) -> Path:
    """Write a dataset in OGB's raw format (for tests and examples); returns ``root``."""
    import gzip

    root = Path(root)
    raw = root / RAW_DIR
    split_dir = root / SPLIT_DIR / scheme
    raw.mkdir(parents=True, exist_ok=True)
    split_dir.mkdir(parents=True, exist_ok=True)

    def write(path: Path, rows: npt.NDArray[Any], fmt: str) -> None:
        with gzip.open(path, "wt") as f:
            np.savetxt(f, rows, fmt=fmt, delimiter=",")

    write(raw / "edge.csv.gz", np.asarray(edges).reshape(-1, 2), "%d")
    write(raw / "node-feat.csv.gz", np.asarray(x).reshape(len(x), -1), "%.9g")
    write(raw / "node-label.csv.gz", np.asarray(y).reshape(-1, 1), "%d")
    write(raw / "num-node-list.csv.gz", np.array([[len(x)]]), "%d")
    write(raw / "num-edge-list.csv.gz", np.array([[len(edges)]]), "%d")
    for name, stem in SPLIT_FILES.items():
        write(split_dir / f"{stem}.csv.gz", np.asarray(splits[name]).reshape(-1, 1), "%d")
    return root
