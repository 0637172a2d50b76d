"""Accuracy over a split's nodes from layer-wise logits, summed over the ranks' shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from distgnn_workload.evaluation.inference import LayerwiseInference
from distgnn_workload.evaluation.store_rows import StoreRows

AllReduce = Callable[[list[float]], list[float]]
"""Element-wise sum over the trainers (``Collectives.all_reduce``)."""


def share_counts(
    logits: Tensor, rows: StoreRows, lo: int, hi: int, splits: Sequence[str]
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
    splits: Sequence[str],
    all_reduce: AllReduce,
) -> dict[str, float | None]:
    """Each split's accuracy under full-neighbourhood inference (one pass for all splits).

    A split with no nodes gets None. Every rank must call, with the same splits.
    """
    logits = engine.logits(model)
    lo, hi = engine.share
    summed = all_reduce(share_counts(logits, engine.rows, lo, hi, splits))
    out: dict[str, float | None] = {}
    for i, split in enumerate(splits):
        correct, count = summed[2 * i], summed[2 * i + 1]
        out[split] = correct / count if count else None
    return out
