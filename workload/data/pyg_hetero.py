"""Loader of a PyG ``HeteroData`` saved with ``torch.save``, and the conversion back.

Each node type needs a node count: ``data[t].num_nodes``, or features ``data[t].x`` [N, F]
(float) whose rows count the nodes. Each edge type needs ``edge_index`` [2, E]. The target
node type holds ``y`` [N] (or [N, 1], negative for unlabelled nodes) and ``train_mask``,
``val_mask`` (or ``valid_mask``) and ``test_mask``: boolean [N] masks or integer index
vectors. ``data.num_classes`` is read when present, else inferred from ``y``. Reverse
relations are added as ``ToUndirected`` adds them; a graph saved after ``ToUndirected`` loads
unchanged. torch is imported here only, when a PyG dataset is actually loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, edge_type_key
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.labels import choose_target_type, class_count, mask_fields
from distgnn_workload.data.pyg import ALIASES, _mask, _numpy, load_safely

MASKS = {"train": "train_mask", "val": "val_mask", "test": "test_mask"}


def _load(path: Path) -> Any:
    safe: list[Any] = []
    try:
        from torch_geometric.data import Data, HeteroData
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.storage import (
            BaseStorage,
            EdgeStorage,
            GlobalStorage,
            NodeStorage,
        )

        safe = [HeteroData, BaseStorage, EdgeStorage, GlobalStorage, NodeStorage]
        safe += [Data, DataEdgeAttr, DataTensorAttr]  # to say that a Data is not hetero
    except ImportError:
        pass
    return load_safely(path, safe, "a torch_geometric.data.HeteroData", "the dataset path")


def _get(store: Any, name: str) -> Any:
    for key in ALIASES.get(name, (name,)):
        if key in store:
            return store[key]
    return None


def load_pyg_hetero(
    path: str | Path, *, target_node_type: str | None = None, add_reverse: bool = True
) -> HeteroGraphData:
    """Load and validate a saved PyG ``HeteroData``; ``target_node_type`` None takes the only
    node type with labels ``y``."""
    path = Path(path)
    obj = _load(path)
    if not (hasattr(obj, "node_types") and hasattr(obj, "edge_types")):
        raise DatasetError(
            f"holds a {type(obj).__name__}, not a torch_geometric.data.HeteroData; save the "
            "heterogeneous graph itself (a homogeneous Data loads as a pyg dataset)",
            source=path,
        )
    node_types = list(obj.node_types)
    for et in obj.edge_types:
        node_types += [t for t in (et[0], et[2]) if t not in node_types]
    counts: dict[str, int] = {}
    x: dict[str, npt.NDArray[np.float32]] = {}
    for t in node_types:
        store = obj[t] if t in obj.node_types else {}
        feats = _get(store, "x")
        if feats is not None:
            x[t] = _features(feats, t, path)
        if "num_nodes" in store and store["num_nodes"] is not None:
            counts[t] = int(store["num_nodes"])
            if t in x and len(x[t]) != counts[t]:
                raise DatasetError(
                    f"data[{t!r}].x has {len(x[t])} rows but num_nodes is {counts[t]}",
                    source=path,
                )
        elif t in x:
            counts[t] = len(x[t])
        else:
            raise DatasetError(
                f"node type {t!r} has neither num_nodes nor x; set data[{t!r}].num_nodes",
                source=path,
            )
    edges: dict[EdgeType, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
    for et in obj.edge_types:
        edges[tuple(et)] = _edge_index(obj[et], tuple(et), path)
    target = _target(obj, node_types, target_node_type, path)
    n = counts[target]
    store = obj[target]
    y = _numpy(store["y"], f"data[{target!r}].y", path)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(
            f"data[{target!r}].y must be an integer tensor [{n}] (one label per {target} node, "
            f"negative for none), got {y.dtype} {y.shape}",
            source=path,
        )
    y = np.where(y < 0, -1, y).astype(np.int64)
    declared = getattr(obj, "num_classes", None)
    num_classes = class_count(y, declared)
    if n and y.max() >= num_classes:
        row = int(np.flatnonzero(y >= num_classes)[0])
        raise DatasetError(
            f"data[{target!r}].y[{row}] = {y[row]} is out of range for num_classes={num_classes}",
            source=path,
        )
    masks: dict[str, npt.NDArray[np.bool_]] = {}
    for split, name in MASKS.items():
        value = _get(store, name)
        if value is None:
            raise DatasetError(
                f"data[{target!r}] lacks {name}; it needs {', '.join(MASKS.values())}",
                source=path,
            )
        masks[split] = _mask(value, f"data[{target!r}].{name}", n, path)
        unlabelled = masks[split] & (y < 0)
        if unlabelled.any():
            node = int(np.flatnonzero(unlabelled)[0])
            raise DatasetError(
                f"data[{target!r}].{name} selects node {node}, whose label is negative (none)",
                source=path,
            )
    return HeteroGraphData.from_edges(
        counts,
        edges,
        x,
        target,
        y,
        **mask_fields(masks),
        num_classes=num_classes,
        add_reverse=add_reverse,
        name=path.stem,
    )


def _features(value: Any, node_type: str, path: Path) -> npt.NDArray[np.float32]:
    x = _numpy(value, f"data[{node_type!r}].x", path)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.floating):
        raise DatasetError(
            f"data[{node_type!r}].x must be a float tensor [N, F], got {x.dtype} {x.shape}",
            source=path,
        )
    finite = np.isfinite(x).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise DatasetError(
            f"data[{node_type!r}].x[{row}] holds a NaN or infinite value", source=path
        )
    return x.astype(np.float32, copy=False)


def _edge_index(store: Any, et: EdgeType, path: Path) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    try:
        key = edge_type_key(et)
    except ValueError as err:
        raise DatasetError(str(err), source=path) from None
    if "edge_index" not in store:
        raise DatasetError(
            f"edge type {key} has no edge_index; store each edge type's edges as an integer "
            "tensor [2, E]",
            source=path,
        )
    ei = _numpy(store["edge_index"], f"data[{key}].edge_index", path)
    if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
        raise DatasetError(
            f"data[{key}].edge_index must be an integer tensor [2, E], got {ei.dtype} {ei.shape}",
            source=path,
        )
    return ei[0], ei[1]


def _target(obj: Any, node_types: list[str], wanted: str | None, path: Path) -> str:
    labelled = [str(t) for t in obj.node_types if "y" in obj[t]]
    return choose_target_type(node_types, labelled, wanted, path)


def to_pyg_hetero(graph: HeteroGraphData) -> Any:
    """The graph as a PyG ``HeteroData`` (reverse relations included, as stored), with
    ``y`` and the masks on the target type: for reference models and for saving."""
    import torch
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in graph.node_counts.items():
        data[t].num_nodes = n
        if t in graph.x:
            data[t].x = torch.from_numpy(graph.x[t])
    target = data[graph.target_node_type]
    target.y = torch.from_numpy(graph.y)
    for split, name in MASKS.items():
        target[name] = torch.from_numpy(getattr(graph, f"{split}_mask"))
    for et in graph.edge_types:
        data[et].edge_index = torch.from_numpy(graph.edge_index(et))
    data.num_classes = graph.num_classes
    return data
