"""Loader of an OGB heterogeneous node-property dataset in its raw format (ogbn-mag's)::

    <dataset>/
    ├── raw/
    │   ├── num-node-dict.csv.gz         header of node types, then one row of node counts
    │   ├── triplet-type-list.csv.gz     one "src,rel,dst" edge type per line
    │   ├── nodetype-has-label.csv.gz    header of node types, then one row of True/False
    │   ├── relations/<src>___<rel>___<dst>/
    │   │   ├── edge.csv.gz              "src,dst" per line, ids per node type from 0
    │   │   └── num-edge-list.csv.gz     the edge count (lines of edge.csv.gz)
    │   ├── node-feat/<type>/node-feat.csv.gz    F floats per node, only for types with features
    │   └── node-label/<type>/node-label.csv.gz  one class per node (empty or nan: unlabelled)
    └── split/<scheme>/
        ├── nodetype-has-split.csv.gz    header of node types, then one row of True/False
        └── <type>/{train,valid,test}.csv.gz     one node id per line

as OGB's ``read_csv_heterograph_raw``, ``read_node_label_hetero`` and
``read_nodesplitidx_split_hetero`` read it. Other files (``node_year``, ``edge_reltype``) are
ignored. Uncompressed ``.csv`` files are accepted as well. Node types and edge types come in
sorted order, as OGB lists them; reverse relations are added as PyG's ``ToUndirected`` adds
them (see :mod:`distgnn_workload.data.graph`).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, is_type_name
from distgnn_workload.data.csv_files import find_csv, read_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.labels import choose_target_type, mask_fields
from distgnn_workload.data.ogb import MAX_CLASSES, SPLIT_FILES, _split_masks
from distgnn_workload.data.ogb_files import RAW_DIR, first_bad_row, required, split_scheme_dir

RELATION_SEPARATOR = "___"
"""OGB's folder name of an edge type: ``<src>___<rel>___<dst>``."""
HINT = "download the dataset and unpack it so that raw/ and split/ sit under the dataset path"

ProgressFn = Callable[[float], None]


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    """The non-empty lines of a small text table as (line number, comma-separated fields)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise DatasetError(f"cannot be read ({err}); is it complete?", source=path) from None
    rows = [(i, line.strip().split(",")) for i, line in enumerate(text.splitlines(), start=1)]
    return [(i, [c.strip() for c in cells]) for i, cells in rows if cells != [""]]


def _header_table(folder: Path, stem: str, *, required: bool = True) -> dict[str, str] | None:
    """A two-line ``type,type,...`` / ``value,value,...`` table (OGB writes it with pandas)."""
    path = find_csv(folder, stem)
    if path is None:
        if required:
            raise DatasetError(f"{stem}.csv.gz is missing; {HINT}", source=folder)
        return None
    rows = _lines(path)
    if len(rows) != 2:
        raise DatasetError(
            f"has {len(rows)} lines; expected a header of node types and one row of values "
            "(only single-graph node-property datasets are supported)",
            source=path,
        )
    (_, header), (line, values) = rows
    if len(values) != len(header):
        raise DatasetError(
            f"has {len(values)} values for {len(header)} node types in the header",
            source=path,
            line=line,
        )
    for name in header:
        if not is_type_name(name):
            raise DatasetError(
                f"node type {name!r} is not a type name (letters, digits and single "
                "underscores, starting with a letter)",
                source=path,
                line=1,
            )
    return dict(zip(header, values, strict=True))


def _node_counts(raw: Path) -> dict[str, int]:
    table = _header_table(raw, "num-node-dict")
    assert table is not None
    path = find_csv(raw, "num-node-dict")
    counts: dict[str, int] = {}
    for name, value in sorted(table.items()):
        try:
            counts[name] = int(value)
        except ValueError:
            counts[name] = -1
        if counts[name] < 0:
            raise DatasetError(
                f"the node count of {name!r} is {value!r}, not a non-negative integer",
                source=path,
                line=2,
            )
    return counts


def _flags(folder: Path, stem: str, counts: Mapping[str, int]) -> list[str] | None:
    """The node types a True/False table marks True; None when the table is absent."""
    table = _header_table(folder, stem, required=False)
    if table is None:
        return None
    path = find_csv(folder, stem)
    marked = []
    for name, value in table.items():
        if value not in ("True", "False"):
            raise DatasetError(f"{name!r} is {value!r}; write True or False", source=path, line=2)
        if name not in counts:
            raise DatasetError(
                f"names node type {name!r}, which num-node-dict does not count", source=path, line=1
            )
        if value == "True":
            marked.append(name)
    return sorted(marked)


def _edge_types(raw: Path, counts: Mapping[str, int]) -> list[EdgeType]:
    path = required(raw, "triplet-type-list", HINT)
    types: list[EdgeType] = []
    for line, cells in _lines(path):
        if len(cells) != 3:
            raise DatasetError(
                f"has {len(cells)} columns, expected 3 (src,rel,dst)", source=path, line=line
            )
        src, rel, dst = cells
        for name in cells:
            if not is_type_name(name):
                raise DatasetError(
                    f"{name!r} is not a type name (letters, digits and single underscores, "
                    "starting with a letter)",
                    source=path,
                    line=line,
                )
        for name in (src, dst):
            if name not in counts:
                raise DatasetError(
                    f"node type {name!r} is not in num-node-dict ({', '.join(counts)})",
                    source=path,
                    line=line,
                )
        if (src, rel, dst) in types:
            raise DatasetError(f"lists {src},{rel},{dst} twice", source=path, line=line)
        types.append((src, rel, dst))
    if not types:
        raise DatasetError("lists no edge types", source=path)
    return sorted(types)


def _relation_edges(
    raw: Path, et: EdgeType, counts: Mapping[str, int]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    folder = raw / "relations" / RELATION_SEPARATOR.join(et)
    edge_file = required(folder, "edge", f"the edge type {','.join(et)} is in triplet-type-list")
    edges = read_csv(edge_file, np.int64, columns=2)
    for col, node_type in ((0, et[0]), (1, et[2])):
        n = counts[node_type]
        bad = (edges[:, col] < 0) | (edges[:, col] >= n)
        if bad.any():
            row = first_bad_row(bad)
            role = "source" if col == 0 else "destination"
            raise DatasetError(
                f"edge ({edges[row, 0]}, {edges[row, 1]}): {role} {edges[row, col]} is outside "
                f"[0, {n}): {node_type} has {n} nodes",
                source=edge_file,
                line=row + 1,
            )
    count_file = find_csv(folder, "num-edge-list")
    if count_file is not None:
        declared = read_csv(count_file, np.int64, columns=1)
        if len(declared) != 1:
            raise DatasetError(
                f"lists {len(declared)} graphs; only single-graph datasets are supported",
                source=count_file,
            )
        if int(declared[0, 0]) != len(edges):
            raise DatasetError(
                f"has {len(edges)} edges but num-edge-list says {int(declared[0, 0])}",
                source=edge_file,
            )
    idx = edges.astype(np.int32) if max(counts[et[0]], counts[et[2]]) < 2**31 else edges
    return idx[:, 0].copy(), idx[:, 1].copy()


def _features(raw: Path, node_type: str, n: int) -> npt.NDArray[np.float32] | None:
    path = find_csv(raw / "node-feat" / node_type, "node-feat")
    if path is None:
        return None
    x = read_csv(path, np.float32)
    if len(x) != n:
        raise DatasetError(
            f"has {len(x)} rows but {node_type} has {n} nodes (num-node-dict); each node "
            "needs one feature row",
            source=path,
        )
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        raise DatasetError(
            "holds a NaN or infinite feature", source=path, line=first_bad_row(~finite) + 1
        )
    return x


def _labels(path: Path, node_type: str, n: int, num_classes: int | None) -> npt.NDArray[np.int64]:
    """One class per node; ``nan`` (OGB's mark of an unlabelled node) becomes -1."""
    values = read_csv(path, np.float64, columns=1)[:, 0]
    if len(values) != n:
        raise DatasetError(
            f"has {len(values)} labels but {node_type} has {n} nodes; each node needs one "
            "label (nan for none)",
            source=path,
        )
    known = ~np.isnan(values)
    limit = num_classes if num_classes is not None else MAX_CLASSES
    bad = known & ((values < 0) | (values >= limit) | (values != np.round(values)))
    if bad.any():
        row = first_bad_row(bad)
        raise DatasetError(
            f"label {values[row]:g} is not a class: classes are integers 0..{limit - 1}",
            source=path,
            line=row + 1,
        )
    y = np.full(n, -1, dtype=np.int64)
    y[known] = values[known].astype(np.int64)
    return y


def load_ogb_hetero(
    root: str | Path,
    split_scheme: str | None = None,
    *,
    target_node_type: str | None = None,
    num_classes: int | None = None,
    add_reverse: bool = True,
    progress: ProgressFn | None = None,
) -> HeteroGraphData:
    """Load an OGB heterogeneous raw dataset directory.

    ``target_node_type`` None takes the only node type with labels; ``num_classes`` None
    infers it from the labels; ``add_reverse`` False keeps each relation as the files hold it.
    """
    root = Path(root)
    report = progress or (lambda _: None)
    if not root.is_dir():
        raise DatasetError(
            "is not a directory; the dataset path must name the folder that holds raw/ and split/",
            source=root,
        )
    raw = root / RAW_DIR
    counts = _node_counts(raw)
    edge_types = _edge_types(raw, counts)
    target = _target_type(raw, counts, target_node_type)
    split_dir = split_scheme_dir(root, split_scheme)
    split_flags = _flags(split_dir, "nodetype-has-split", counts)
    if split_flags is not None and target not in split_flags:
        raise DatasetError(
            f"does not mark {target!r} True: the target type needs train/valid/test files",
            source=find_csv(split_dir, "nodetype-has-split"),
        )
    split_paths = {
        name: required(split_dir / target, stem, HINT) for name, stem in SPLIT_FILES.items()
    }
    label_file = required(raw / "node-label" / target, "node-label", HINT)
    y = _labels(label_file, target, counts[target], num_classes)
    masks = _split_masks(split_paths, counts[target])
    for name, mask in masks.items():
        unlabelled = mask & (y < 0)
        if unlabelled.any():
            node = int(np.flatnonzero(unlabelled)[0])
            raise DatasetError(
                f"selects {target} node {node}, which has no label in {label_file.name}",
                source=split_paths[name],
            )
    report(0.1)
    x: dict[str, npt.NDArray[np.float32]] = {}
    for node_type in counts:
        feats = _features(raw, node_type, counts[node_type])
        if feats is not None:
            x[node_type] = feats
    report(0.4)
    edges: dict[EdgeType, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
    for i, et in enumerate(edge_types):
        edges[et] = _relation_edges(raw, et, counts)
        report(0.4 + 0.4 * (i + 1) / len(edge_types))
    graph = HeteroGraphData.from_edges(
        counts,
        edges,
        x,
        target,
        y,
        **mask_fields(masks),
        num_classes=num_classes,
        add_reverse=add_reverse,
        name=root.name,
    )
    del edges
    graph.info["split_scheme"] = split_dir.name
    report(1.0)
    return graph


def _target_type(raw: Path, counts: Mapping[str, int], wanted: str | None) -> str:
    labelled = _flags(raw, "nodetype-has-label", counts)
    if labelled is None:  # no table: the types that have a node-label file
        labelled = sorted(t for t in counts if find_csv(raw / "node-label" / t, "node-label"))
    where: Path | None = find_csv(raw, "nodetype-has-label") or raw / "node-label"
    if wanted is not None and wanted not in counts:
        where = find_csv(raw, "num-node-dict")
    return choose_target_type(list(counts), list(labelled), wanted, where)
