"""Loader of a PyG ``Data`` object saved with ``torch.save`` (or a dict of the same tensors).

Needs ``x`` [N, F], ``y`` [N] (or [N, 1]), ``edge_index`` [2, E] and ``train_mask``,
``val_mask``, ``test_mask``: boolean [N] masks or integer index vectors. ``num_classes``
is read when present, else inferred from ``y``. torch is imported here only, when a PyG
dataset is actually loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csr import csr_from_edges
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.labels import class_count

REQUIRED = ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")
ALIASES = {"val_mask": ("val_mask", "valid_mask")}


def _load(path: Path) -> Any:
    safe: list[Any] = []
    try:
        from torch_geometric.data import Data
        from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
        from torch_geometric.data.storage import GlobalStorage

        safe = [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]
    except ImportError:
        pass
    what = "a torch_geometric.data.Data (or a dict of tensors)"
    return load_safely(path, safe, what, "dataset.pyg.path")


def load_safely(path: Path, safe: list[Any], what: str, setting: str) -> Any:
    """``torch.load(weights_only=True)`` allowing the ``safe`` classes; a missing file, or one
    it cannot load, is a DatasetError that says to point ``setting`` at ``what`` saved with
    torch.save."""
    import torch

    if not path.is_file():
        raise DatasetError(
            f"not found; {setting} must name a file saved with torch.save(data, path)",
            source=path,
        )
    try:
        with torch.serialization.safe_globals(safe):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a bad file
        raise DatasetError(
            f"cannot be loaded with torch.load(weights_only=True): {str(err).splitlines()[0]}; "
            f"save {what} with torch.save",
            source=path,
        ) from None


def _field(obj: Any, name: str) -> Any:
    for key in ALIASES.get(name, (name,)):
        value = obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)
        if value is not None:
            return value
    return None


def _numpy(value: Any, name: str, path: Path) -> npt.NDArray[Any]:
    try:
        arr = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    except Exception as err:
        raise DatasetError(
            f"{name} is not a tensor ({type(value).__name__}): {err}", source=path
        ) from None
    return np.asarray(arr)


def load_pyg(path: str | Path) -> GraphData:
    """Load and validate a saved PyG graph."""
    path = Path(path)
    obj = _load(path)
    missing = [name for name in REQUIRED if _field(obj, name) is None]
    if missing:
        raise DatasetError(
            f"the saved {type(obj).__name__} lacks {', '.join(missing)}; it needs "
            f"{', '.join(REQUIRED)}",
            source=path,
        )
    x = _numpy(_field(obj, "x"), "x", path)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.floating):
        raise DatasetError(f"x must be a float tensor [N, F], got {x.dtype} {x.shape}", source=path)
    n = len(x)
    if not np.all(np.isfinite(x)):
        row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise DatasetError(f"x[{row}] holds a NaN or infinite value", source=path)

    y = _numpy(_field(obj, "y"), "y", path)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(
            f"y must be an integer tensor [{n}] (one label per row of x), got {y.dtype} {y.shape}",
            source=path,
        )
    if n and y.min() < 0:
        row = int(np.flatnonzero(y < 0)[0])
        raise DatasetError(
            f"y[{row}] = {y[row]} is negative; classes are numbered from 0", source=path
        )
    declared = _field(obj, "num_classes")
    num_classes = class_count(y, declared)
    if n and y.max() >= num_classes:
        row = int(np.flatnonzero(y >= num_classes)[0])
        raise DatasetError(
            f"y[{row}] = {y[row]} is out of range for num_classes={num_classes}", source=path
        )

    edge_index = _numpy(_field(obj, "edge_index"), "edge_index", path)
    if (
        edge_index.ndim != 2
        or edge_index.shape[0] != 2
        or not np.issubdtype(edge_index.dtype, np.integer)
    ):
        raise DatasetError(
            f"edge_index must be an integer tensor [2, E], got {edge_index.dtype} {edge_index.shape}",
            source=path,
        )
    bad = ((edge_index < 0) | (edge_index >= n)).any(axis=0)
    if bad.any():
        col = int(np.flatnonzero(bad)[0])
        raise DatasetError(
            f"edge_index[:, {col}] = ({edge_index[0, col]}, {edge_index[1, col]}) refers to a "
            f"node outside [0, {n}): x has {n} rows",
            source=path,
        )
    masks = {name: _mask(_field(obj, name), name, n, path) for name in REQUIRED[3:]}
    indptr, indices, info = csr_from_edges(edge_index[0], edge_index[1], n)
    graph = GraphData(
        indptr=indptr,
        indices=indices,
        x=x.astype(np.float32, copy=False),
        y=y.astype(np.int64, copy=False),
        train_mask=masks["train_mask"],
        val_mask=masks["val_mask"],
        test_mask=masks["test_mask"],
        num_classes=num_classes,
        name=path.stem,
        info=dict(info),
    )
    graph.validate()
    return graph


def _mask(value: Any, name: str, n: int, path: Path) -> npt.NDArray[np.bool_]:
    arr = _numpy(value, name, path)
    if arr.dtype == np.bool_:
        if arr.shape != (n,):
            raise DatasetError(
                f"{name} must be a bool tensor [{n}], got shape {arr.shape}", source=path
            )
        return arr
    if np.issubdtype(arr.dtype, np.integer) and arr.ndim == 1:
        if len(arr) and (arr.min() < 0 or arr.max() >= n):
            raise DatasetError(
                f"{name} as an index vector must hold node ids in [0, {n})", source=path
            )
        mask = np.zeros(n, dtype=np.bool_)
        mask[arr] = True
        return mask
    raise DatasetError(
        f"{name} must be a bool mask [{n}] or an integer index vector, got {arr.dtype} {arr.shape}",
        source=path,
    )
