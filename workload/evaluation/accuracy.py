"""Accuracy over a split's nodes from layer-wise logits, summed over the ranks' shares.

The labels and split masks of a share come from a :class:`SplitRows`: the store's rows by id
range (:class:`~distgnn_workload.evaluation.store_rows.StoreRows`, a homogeneous store) or
the labels and split ids a trainer holds (:class:`HeldSplits`, a typed graph's target type).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor, nn

from distgnn_workload.evaluation.inference import LayerwiseInference, plan_of

AllReduce = Callable[[list[float]], list[float]]
"""Element-wise sum over the trainers (``Collectives.all_reduce``)."""


class SplitRows(Protocol):
    """Labels and split masks of the target type's ids ``[lo, hi)``."""

    def labels(self, lo: int, hi: int) -> npt.NDArray[np.int64]: ...

    def mask(self, split: str, lo: int, hi: int) -> npt.NDArray[np.bool_]: ...


class HeldSplits:
    """:class:`SplitRows` of labels and split ids held in memory: ``labels`` of every id,
    ``split_ids[split]`` the ids in each split."""

    def __init__(self, labels: Tensor, split_ids: Mapping[str, Tensor]) -> None:
        self._labels = labels.cpu().numpy()
        self.split_ids = {s: ids.cpu().numpy() for s, ids in split_ids.items()}

    def labels(self, lo: int, hi: int) -> npt.NDArray[np.int64]:
        return self._labels[lo:hi].astype(np.int64, copy=False)

    def mask(self, split: str, lo: int, hi: int) -> npt.NDArray[np.bool_]:
        ids = self.split_ids[split]
        out = np.zeros(hi - lo, dtype=np.bool_)
        out[ids[(ids >= lo) & (ids < hi)] - lo] = True
        return out


def ids_of(parts: Sequence[Tensor]) -> Tensor:
    """One split's ids, from its per-partition lists."""
    if not parts:
        return torch.zeros(0, dtype=torch.int64)
    return torch.cat([p.cpu() for p in parts])


def share_counts(
    logits: Tensor, rows: SplitRows, lo: int, hi: int, splits: Sequence[str]
) -> list[float]:
    """``[correct, count]`` per split over the ids ``[lo, hi)`` whose logits are given."""
    predicted = logits.argmax(dim=-1).cpu()
    labels = torch.from_numpy(rows.labels(lo, hi))
    hit = predicted == labels
    out: list[float] = []
    for split in splits:
        mask = torch.from_numpy(rows.mask(split, lo, hi))
        out += [float(hit[mask].sum()), float(mask.sum())]
    return out


def full_neighbourhood_accuracy(
    engine: LayerwiseInference,
    model: nn.Module,
    rows: SplitRows,
    splits: Sequence[str],
    all_reduce: AllReduce,
) -> dict[str, float | None]:
    """Each split's accuracy on the target type under full-neighbourhood inference (one pass
    for all splits). A split with no nodes gets None. Every rank must call, with the same
    splits."""
    logits = engine.logits(model)
    lo, hi = engine.share(plan_of(model).target_node_type)
    summed = all_reduce(share_counts(logits, rows, lo, hi, splits))
    out: dict[str, float | None] = {}
    for i, split in enumerate(splits):
        correct, count = summed[2 * i], summed[2 * i + 1]
        out[split] = correct / count if count else None
    return out
