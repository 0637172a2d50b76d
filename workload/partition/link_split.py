"""The edge split of a link-prediction store: written once by the partition Job, read by
every trainer, so all processes agree on the positives and the evaluation negatives.

Layout inside the store (node ids are the store's, as its topology uses: new ids in a
homogeneous store, type-local ids of the supervised edge type's ends in a typed one)::

    link/
    ├── train/part-<p>/src.npy, dst.npy    training positives whose source partition p owns
    ├── valid/src.npy, dst.npy, dst_neg.npy    [E], [E], [E, K] (no dst_neg with 'all';
    │                                          dst_neg int32 below 2^31 nodes, read as int64)
    └── test/src.npy, dst.npy, dst_neg.npy

META.json records ``task: linkPrediction`` and, under ``link``, the split's sizes and how it
was drawn (a typed store adds the edge type and its reverse). The message-passing topology (``topology/`` and the partitions' CSRs) holds the
training pairs only (:mod:`.link_edges`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import edge_type_key
from distgnn_workload.data.csr import index_dtype
from distgnn_workload.data.host_threads import take
from distgnn_workload.data.link_data import GivenEdges
from distgnn_workload.partition.link_edges import HELD_OUT, EdgeSplitResult, TypedEdgeSplit
from distgnn_workload.partition.meta import (
    META_FILE,
    OWNER_DIR,
    StoreError,
    npy_name,
    part_dir_name,
)

if TYPE_CHECKING:
    from torch import Tensor

LINK_DIR = "link"
SPLITS = ("train", "valid", "test")
TASK_KEY = "task"
TASK_LINK = "linkPrediction"
LINK_META_KEY = "link"


@dataclass(frozen=True)
class EdgeSplit:
    """Positive edges of one split, int64 store ids; ``dst_neg`` [E, K] are the fixed
    evaluation negatives of valid and test (None for train, and with ``negatives: all``)."""

    src: Tensor
    dst: Tensor
    dst_neg: Tensor | None

    def __len__(self) -> int:
        return int(self.src.shape[0])


def write_link_split(
    root: Path,
    split: EdgeSplitResult,
    new_ids: npt.NDArray[Any],
    offsets: npt.NDArray[np.int64],
) -> dict[str, Any]:
    """Write ``split`` (dataset ids) into a store being written at ``root``, in the store's
    new ids; returns what META.json records under ``link``."""
    remap = np.asarray(new_ids, dtype=np.int64)
    src = remap[split.train.src]
    owner = np.searchsorted(offsets, src, side="right") - 1
    # negatives remapped in the narrowest dtype of the store's ids: half the bytes below 2^31
    narrow = remap.astype(index_dtype(len(remap)))
    held = {
        name: GivenEdges(
            remap[e.src], remap[e.dst], None if e.dst_neg is None else take(narrow, e.dst_neg)
        )
        for name in ("valid", "test")
        for e in (split.split(name),)
    }
    train = GivenEdges(src, remap[split.train.dst])
    return write_split_arrays(root, train, owner, len(offsets) - 1, held, split.info, len(remap))


def write_split_arrays(
    root: Path,
    train: GivenEdges,
    owner: npt.NDArray[Any],
    k: int,
    held: dict[str, GivenEdges],
    info: dict[str, Any],
    num_dst: int,
) -> dict[str, Any]:
    """Write the split's arrays (store ids) under ``root/link``: the training positives by
    ``owner`` (the partition of each one's source, of ``k``), valid and test whole, their
    negatives in the narrowest dtype of ``num_dst`` ids; returns META.json's ``link``."""
    base = root / LINK_DIR
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(k + 1))
    per_part = []
    for p in range(k):
        ix = order[bounds[p] : bounds[p + 1]]
        folder = base / "train" / part_dir_name(p)
        folder.mkdir(parents=True)
        np.save(folder / "src.npy", train.src[ix])
        np.save(folder / "dst.npy", train.dst[ix])
        per_part.append(len(ix))
    meta: dict[str, Any] = {"num_train": len(train.src), "train_per_partition": per_part}
    for name in ("valid", "test"):
        edges = held[name]
        folder = base / name
        folder.mkdir(parents=True)
        np.save(folder / "src.npy", edges.src)
        np.save(folder / "dst.npy", edges.dst)
        if edges.dst_neg is not None:
            # The narrowest dtype of the store's ids: half the bytes below 2^31 nodes.
            narrow_neg = edges.dst_neg.astype(index_dtype(num_dst), copy=False)
            np.save(folder / "dst_neg.npy", narrow_neg)
        meta[f"num_{name}"] = len(edges)
        meta[f"{name}_negatives"] = None if edges.dst_neg is None else int(edges.dst_neg.shape[1])
    meta["info"] = info
    return meta


def split_writer(
    split: TypedEdgeSplit, k: int, num_dst: int
) -> Callable[[Path, dict[str, Any]], None]:
    """What adds the split to a typed store being written: ``link/`` (the homogeneous
    layout, in type-local ids; training positives by the partition owning their source, read
    from the store's ``owner/``) and META.json's ``task`` and ``link`` records."""

    def write(root: Path, meta: dict[str, Any]) -> None:
        owner_src = np.load(root / OWNER_DIR / npy_name(split.edge_type[0]), mmap_mode="r")
        owner = np.asarray(owner_src[split.train.src])
        held = {name: split.split(name) for name in HELD_OUT}
        record = write_split_arrays(root, split.train, owner, k, held, split.info, num_dst)
        record.update(
            edge_type=edge_type_key(split.edge_type),
            reverse_edge_type=(None if split.reverse is None else edge_type_key(split.reverse)),
        )
        meta[TASK_KEY] = TASK_LINK
        meta[LINK_META_KEY] = record

    return write


def link_meta(store_dir: str | Path) -> dict[str, Any]:
    """META.json's ``link`` record of a link-prediction store."""
    path = Path(store_dir) / META_FILE
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise StoreError(f"{path} is unreadable: {err}") from None
    if meta.get(TASK_KEY) != TASK_LINK:
        raise StoreError(
            f"{store_dir} is not a link-prediction store (META.json task is "
            f"{meta.get(TASK_KEY)!r}); partition a job with task linkPrediction"
        )
    out: dict[str, Any] = meta[LINK_META_KEY]
    return out


def read_link_split(store_dir: str | Path, split: str, part: int | None = None) -> EdgeSplit:
    """The positives of ``split`` ("train", "valid" or "test") and, for valid and test,
    their fixed negatives. ``part`` reads one partition's share of the training positives
    (those whose source it owns); None reads them all."""
    import torch

    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    meta = link_meta(store_dir)
    base = Path(store_dir) / LINK_DIR / split

    def load(path: Path) -> Tensor:
        try:
            return torch.from_numpy(np.load(path).astype(np.int64, copy=False))
        except (OSError, ValueError) as err:
            raise StoreError(
                f"{path} is missing or unreadable ({err}); delete {store_dir} to partition again"
            ) from None

    if split == "train":
        k = len(meta["train_per_partition"])
        parts = range(k) if part is None else [part]
        if part is not None and not 0 <= part < k:
            raise IndexError(f"partition {part} out of range [0, {k})")
        folders = [base / part_dir_name(p) for p in parts]
        src = torch.cat([load(f / "src.npy") for f in folders])
        dst = torch.cat([load(f / "dst.npy") for f in folders])
        return EdgeSplit(src, dst, None)
    if part is not None:
        raise ValueError("part applies to the train split only; valid and test are whole")
    neg = load(base / "dst_neg.npy") if meta[f"{split}_negatives"] is not None else None
    return EdgeSplit(load(base / "src.npy"), load(base / "dst.npy"), neg)
