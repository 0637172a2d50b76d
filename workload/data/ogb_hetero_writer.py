"""Writing a heterogeneous dataset in OGB's raw layout (ogbn-mag's), for tests and examples.

The layout is the one :mod:`distgnn_workload.data.ogb_hetero` reads; see its docstring.
"""

from __future__ import annotations

import gzip
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.ogb import SPLIT_FILES
from distgnn_workload.data.ogb_files import RAW_DIR, SPLIT_DIR, write_csv_gz
from distgnn_workload.data.ogb_hetero import RELATION_SEPARATOR


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)


def _flag_table(types: list[str], marked: set[str]) -> str:
    return ",".join(types) + "\n" + ",".join(str(t in marked) for t in types) + "\n"


def write_ogb_hetero(
    root: str | Path,
    node_counts: Mapping[str, int],
    edges: Mapping[EdgeType, npt.ArrayLike],
    x: Mapping[str, npt.ArrayLike],
    target_node_type: str,
    y: npt.ArrayLike,
    splits: Mapping[str, npt.ArrayLike],
    *,
    scheme: str = "time",
) -> Path:
    """Write ``root`` in OGB's heterogeneous raw layout; returns ``root``.

    ``edges`` maps each edge type to its [E, 2] (src, dst) ids; ``y`` holds one class per
    target node, negative for none (written as ``nan``); ``splits`` maps train, val and test
    to target node ids.
    """
    root = Path(root)
    raw = root / RAW_DIR
    split_dir = root / SPLIT_DIR / scheme
    types = sorted(node_counts)
    _write_text(
        raw / "num-node-dict.csv.gz",
        ",".join(types) + "\n" + ",".join(str(node_counts[t]) for t in types) + "\n",
    )
    _write_text(raw / "triplet-type-list.csv.gz", "".join(",".join(et) + "\n" for et in edges))
    for et, pairs in edges.items():
        folder = raw / "relations" / RELATION_SEPARATOR.join(et)
        arr = np.asarray(pairs).reshape(-1, 2)
        write_csv_gz(folder / "edge.csv.gz", arr, "%d")
        write_csv_gz(folder / "num-edge-list.csv.gz", np.array([[len(arr)]]), "%d")
    for node_type, feats in x.items():
        arr = np.asarray(feats, dtype=np.float32)
        write_csv_gz(raw / "node-feat" / node_type / "node-feat.csv.gz", arr, "%.9g")
    _write_text(raw / "nodetype-has-label.csv.gz", _flag_table(types, {target_node_type}))
    labels = np.asarray(y)
    text = "".join(f"{int(v)}\n" if v >= 0 else "nan\n" for v in labels.tolist())
    _write_text(raw / "node-label" / target_node_type / "node-label.csv.gz", text)
    _write_text(split_dir / "nodetype-has-split.csv.gz", _flag_table(types, {target_node_type}))
    for name, stem in SPLIT_FILES.items():
        ids = np.asarray(splits[name]).reshape(-1, 1)
        write_csv_gz(split_dir / target_node_type / f"{stem}.csv.gz", ids, "%d")
    return root
