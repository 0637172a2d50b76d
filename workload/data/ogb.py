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

from distgnn_workload.data.csr import csr_from_edges
from distgnn_workload.data.csv_files import read_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.labels import class_count, mask_fields
from distgnn_workload.data.ogb_files import (
    DOWNLOAD_HINT,
    first_bad_row,
    raw_tables,
    read_edges,
    read_features,
    required,
    single_count,
    write_csv_gz,
    write_raw_graph,
)
from distgnn_workload.data.ogb_files import RAW_DIR as RAW_DIR
from distgnn_workload.data.ogb_files import SPLIT_DIR as SPLIT_DIR
from distgnn_workload.data.ogb_files import split_scheme_dir as split_scheme_dir

log = logging.getLogger(__name__)

SPLIT_FILES = {"train": "train", "val": "valid", "test": "test"}
MAX_CLASSES = 10_000
"""Labels above this are taken for a corrupt file, not for a real class count."""

ProgressFn = Callable[[float], None]

_single_count = single_count  # the out-of-core partition Job reads the counts through this name


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
    tables = raw_tables(root)
    label_file, split_dir, split_paths = node_property_files(root, tables.folder, split_scheme)

    x = read_features(tables.features, tables.declared_nodes)
    report(0.3)
    n = len(x)
    y = _labels(label_file, n, num_classes)
    report(0.4)

    edges = read_edges(tables.edges, n, tables.declared_edges)
    report(0.7)
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
        **mask_fields(masks),
        num_classes=class_count(y, num_classes),
        name=root.name,
        info={**info, "split_scheme": split_dir.name},
    )
    graph.validate()
    return graph


def node_property_files(
    root: Path, raw: Path, split_scheme: str | None
) -> tuple[Path, Path, dict[str, Path]]:
    """A node-property dataset's label table, its split folder and the split tables in it."""
    label_file = required(raw, "node-label", DOWNLOAD_HINT)
    split_dir = split_scheme_dir(root, split_scheme)
    split_paths = {
        name: required(split_dir, stem, DOWNLOAD_HINT) for name, stem in SPLIT_FILES.items()
    }
    return label_file, split_dir, split_paths


def _labels(path: Path, n: int, num_classes: int | None) -> npt.NDArray[np.int64]:
    labels = read_csv(path, np.int64, columns=1)
    if len(labels) != n:
        raise DatasetError(
            f"has {len(labels)} labels but the graph has {n} nodes; each node needs one label",
            source=path,
        )
    y = labels[:, 0]
    if n and y.min() < 0:
        row = first_bad_row(y < 0)
        raise DatasetError(
            f"label {y[row]} is negative; classes are numbered from 0", source=path, line=row + 1
        )
    limit = num_classes if num_classes is not None else MAX_CLASSES
    if n and y.max() >= limit:
        row = first_bad_row(y >= limit)
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
            row = first_bad_row(bad)
            raise DatasetError(
                f"node id {ids[row]} is outside [0, {n}): the graph has {n} nodes",
                source=path,
                line=row + 1,
            )
        taken = owner[ids] >= 0
        if taken.any():
            row = first_bad_row(taken)
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
    root = Path(root)
    raw, split_dir = write_raw_graph(root, edges, x, scheme)
    write_csv_gz(raw / "node-label.csv.gz", np.asarray(y).reshape(-1, 1), "%d")
    for name, stem in SPLIT_FILES.items():
        write_csv_gz(split_dir / f"{stem}.csv.gz", np.asarray(splits[name]).reshape(-1, 1), "%d")
    return root
