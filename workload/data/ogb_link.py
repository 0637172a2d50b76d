"""Loader of a homogeneous OGB link-property dataset in its raw format, as OGB's downloads
unpack it (``ogb/linkproppred``: ``dataset.py``, ``master.csv``; ``ogb/io/read_graph_raw.py``)::

    <dataset>/
    ├── raw/
    │   ├── edge.csv.gz            "src,dst" per line: the training graph's edges
    │   ├── node-feat.csv.gz       F comma-separated floats per node, in node order
    │   ├── num-node-list.csv.gz   the node count (one line)
    │   └── num-edge-list.csv.gz   the edge count (lines of edge.csv.gz)
    └── split/<scheme>/            time for ogbl-citation2 and ogbl-collab
        ├── train.pt, valid.pt, test.pt     torch.save'd dicts of numpy arrays
        └── (or split_dict.pt: {"train": ..., "valid": ..., "test": ...} in one file)

The split dicts differ by dataset:

- ogbl-citation2 (directed citations): ``source_node`` [E] and ``target_node`` [E]; valid
  and test also ``target_node_neg`` [E, 1000], each positive's own negative destinations.
- ogbl-collab (undirected collaborations, OGB adds the inverse of every edge): ``edge``
  [E, 2], ``weight`` [E] and ``year`` [E]; valid and test also ``edge_neg`` [E', 2], negative
  pairs shared by all positives (OGB ranks each positive against all of them for Hits@50).

Extra raw files (``node_year``, ``edge_weight``, ``edge_year``) are not needed. The split is
read when the job asks for the dataset's own split (``linkPrediction.split.fromDataset``).
collab's global ``edge_neg`` is checked but not used: evaluation ranks each positive against
its own ``evaluation.negatives`` destinations, drawn with the seed. A file that does not
fit raises :class:`DatasetError` naming the file and the line or entry.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.link_data import GivenEdges, LinkData
from distgnn_workload.data.ogb import ProgressFn
from distgnn_workload.data.ogb_files import (
    raw_tables,
    read_edges,
    read_features,
    split_scheme_dir,
    write_raw_graph,
)

log = logging.getLogger(__name__)

SPLIT_FILES = ("train", "valid", "test")
SPLIT_DICT_FILE = "split_dict.pt"


def load_ogb_link(
    root: str | Path,
    split_scheme: str | None = None,
    *,
    read_split: bool = True,
    progress: ProgressFn | None = None,
) -> LinkData:
    """Load an OGB link dataset directory; ``read_split`` False reads only ``raw/``."""
    root = Path(root)
    report = progress or (lambda _: None)
    tables = raw_tables(root)
    x = read_features(tables.features, tables.declared_nodes)
    n = len(x)
    report(0.4)
    edges = read_edges(tables.edges, n, tables.declared_edges)
    report(0.8)
    given = None
    info: dict[str, Any] = {}
    if read_split:
        split_dir = split_scheme_dir(root, split_scheme)
        given, info = _read_split(split_dir, n)
        info["split_scheme"] = split_dir.name
    report(1.0)
    data = LinkData(
        x=x,
        src=np.ascontiguousarray(edges[:, 0]),
        dst=np.ascontiguousarray(edges[:, 1]),
        name=root.name,
        given=given,
        info=info,
    )
    data.validate()
    return data


def _read_split(split_dir: Path, n: int) -> tuple[dict[str, GivenEdges], dict[str, Any]]:
    combined = split_dir / SPLIT_DICT_FILE
    if combined.is_file():
        whole = _load_pt(combined)
        dicts = {}
        for name in SPLIT_FILES:
            if not isinstance(whole.get(name), dict):
                raise DatasetError(f"has no {name!r} dict", source=combined)
            dicts[name] = (combined, whole[name])
    else:
        dicts = {}
        for name in SPLIT_FILES:
            path = split_dir / f"{name}.pt"
            if not path.is_file():
                raise DatasetError(
                    f"{name}.pt is missing: an OGB link dataset's split/<scheme>/ holds "
                    "train.pt, valid.pt and test.pt (or split_dict.pt); restore it, or set "
                    "linkPrediction.split fractions instead of fromDataset",
                    source=split_dir,
                )
            dicts[name] = (path, _load_pt(path))
    out: dict[str, GivenEdges] = {}
    info: dict[str, Any] = {}
    for name, (path, d) in dicts.items():
        out[name] = _split_edges(path, name, d, n, info)
    return out, info


def _load_pt(path: Path) -> dict[str, Any]:
    import torch
    from numpy._core.multiarray import _reconstruct

    allowed: list[Any] = [
        _reconstruct,
        (_reconstruct, "numpy.core.multiarray._reconstruct"),
        np.ndarray,
        np.dtype,
        *(type(np.dtype(t)) for t in ("int64", "int32", "float32", "float64", "bool")),
    ]
    try:
        with torch.serialization.safe_globals(allowed):
            data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as err:
        raise DatasetError(
            f"cannot be read as an OGB split dict of arrays ({type(err).__name__}: "
            f"{str(err).splitlines()[0]})",
            source=path,
        ) from None
    if not isinstance(data, dict):
        raise DatasetError(f"holds a {type(data).__name__}, not a dict of arrays", source=path)
    return data


def _array(path: Path, d: dict[str, Any], key: str, ndim: int) -> npt.NDArray[np.int64]:
    value = d[key]
    if hasattr(value, "numpy"):  # a torch tensor
        value = value.numpy()
    try:
        arr = np.asarray(value)
    except ValueError:
        raise DatasetError(f"{key} has rows of different lengths", source=path) from None
    if arr.dtype == object or arr.ndim != ndim or not np.issubdtype(arr.dtype, np.integer):
        want = "[E]" if ndim == 1 else "[E, K]"
        raise DatasetError(
            f"{key} must be an integer array {want}, got {arr.dtype} of shape {arr.shape} "
            "(rows of different lengths?)",
            source=path,
        )
    return arr.astype(np.int64, copy=False)


def _check_range(path: Path, key: str, arr: npt.NDArray[np.int64], n: int) -> None:
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        flat = int(np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1))[0])
        raise DatasetError(
            f"{key}[{flat}] holds node id {arr[flat].tolist()} outside [0, {n}): the graph "
            f"has {n} nodes",
            source=path,
        )


def _split_edges(
    path: Path, name: str, d: dict[str, Any], n: int, info: dict[str, Any]
) -> GivenEdges:
    neg = None
    if "source_node" in d and "target_node" in d:  # ogbl-citation2
        src = _array(path, d, "source_node", 1)
        dst = _array(path, d, "target_node", 1)
        if len(src) != len(dst):
            raise DatasetError(
                f"source_node has {len(src)} entries but target_node {len(dst)}; they pair "
                "up one to one",
                source=path,
            )
        for key, arr in (("source_node", src), ("target_node", dst)):
            _check_range(path, key, arr, n)
        if "target_node_neg" in d:
            neg = _array(path, d, "target_node_neg", 2)
            if len(neg) != len(src):
                raise DatasetError(
                    f"target_node_neg has {len(neg)} rows but there are {len(src)} positives; "
                    "each positive needs one row of negatives",
                    source=path,
                )
            _check_range(path, "target_node_neg", neg, n)
        elif name != "train":
            log.info("%s has no target_node_neg: negatives are drawn with the seed", path)
    elif "edge" in d:  # ogbl-collab and the other pair-list datasets
        pairs = _array(path, d, "edge", 2)
        if pairs.shape[1] != 2:
            raise DatasetError(f"edge must be [E, 2], got {pairs.shape}", source=path)
        _check_range(path, "edge", pairs, n)
        src, dst = np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
        if "edge_neg" in d:
            global_neg = _array(path, d, "edge_neg", 2)
            if global_neg.shape[1] != 2:
                raise DatasetError(f"edge_neg must be [E, 2], got {global_neg.shape}", source=path)
            _check_range(path, "edge_neg", global_neg, n)
            info[f"{name}_dataset_negative_pairs_unused"] = len(global_neg)
    else:
        raise DatasetError(
            f"holds keys {sorted(d)}; an OGB link split has source_node and target_node "
            "(ogbl-citation2) or edge (ogbl-collab)",
            source=path,
        )
    return GivenEdges(src, dst, neg)


def write_ogb_link(
    root: str | Path,
    edges: npt.NDArray[Any],
    x: npt.NDArray[Any],
    splits: dict[str, dict[str, npt.NDArray[Any]]],
    *,
    scheme: str = "time",
) -> Path:
    """Write a dataset in OGB's raw link format (for tests and examples): ``splits`` maps
    train/valid/test to the dicts OGB saves (citation2's or collab's keys)."""
    import torch

    root = Path(root)
    _, split_dir = write_raw_graph(root, edges, x, scheme)
    for name, d in splits.items():
        torch.save(d, split_dir / f"{name}.pt")
    return root
