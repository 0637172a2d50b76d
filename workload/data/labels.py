"""Labels and train/val/test splits, as the loaders build them for a graph: the split masks
as a graph's keyword arguments, a mask made from an index vector, the class count, and the
choice of the node type whose nodes carry the labels (a typed graph's target type).

Every graph is typed, so these serve both layouts of :mod:`distgnn_workload.data.graph`:
the masks and labels always belong to the target node type (the one type of a homogeneous
graph). All arrays are numpy; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError


class MaskFields(TypedDict):
    """The three split masks, as a graph's keyword arguments."""

    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]


def mask_fields(masks: Mapping[str, npt.NDArray[np.bool_]]) -> MaskFields:
    """``{"train": .., "val": .., "test": ..}`` as ``train_mask``, ``val_mask``, ``test_mask``."""
    return MaskFields(train_mask=masks["train"], val_mask=masks["val"], test_mask=masks["test"])


def class_count(y: npt.NDArray[np.int64], declared: int | None) -> int:
    """``declared`` where given, else one more than the largest label (0 with none)."""
    return int(declared) if declared is not None else int(y.max(initial=-1)) + 1


def bool_mask(value: npt.ArrayLike, n: int) -> npt.NDArray[np.bool_]:
    """A bool mask as given, or one made from an index vector."""
    arr = np.asarray(value).reshape(-1)
    if arr.dtype == np.bool_:
        return arr
    ids = arr.astype(np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise DatasetError(f"a split lists node ids outside [0, {n}): give ids of the target type")
    mask = np.zeros(n, dtype=np.bool_)
    mask[ids] = True
    return mask


def choose_target_type(
    node_types: Sequence[str],
    labelled: Sequence[str],
    wanted: str | None,
    source: str | Path | None,
) -> str:
    """The target node type: ``wanted`` (spec.dataset.hetero.targetNodeType), which must be a
    node type with labels, or else the only labelled type. ``source`` names the file for
    the error."""
    listed = ", ".join(labelled) or "(none)"
    if wanted is not None:
        problem = (
            f"is not one of {', '.join(node_types)}"
            if wanted not in node_types
            else f"has no labels; labelled types: {listed}"
            if wanted not in labelled
            else ""
        )
        if problem:
            raise DatasetError(
                f"target node type {wanted!r} (spec.dataset.hetero.targetNodeType) {problem}",
                source=source,
            )
        return wanted
    if len(labelled) != 1:
        raise DatasetError(
            f"{len(labelled)} node types have labels ({listed}); name the target node type "
            "in spec.dataset.hetero.targetNodeType",
            source=source,
        )
    return labelled[0]
