"""Full-neighbourhood accuracy of a heterogeneous job's target type, and its inputs from the
typed store.

Each rank counts the correct predictions of its share of the target type's validation and
test nodes from :class:`~distgnn_workload.evaluation.hetero_inference.HeteroLayerwiseInference`'s
logits; the counts are summed over the trainers. Featured rows come from the typed store on
the shared volume (:func:`typed_feature_range`: a contiguous id range, read from each
partition's memory-mapped rows), so neither holder mode asks the holders for them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from distgnn_workload.evaluation.accuracy import AllReduce
from distgnn_workload.evaluation.final import FullEvaluation, report_full
from distgnn_workload.evaluation.hetero_inference import HeteroLayerwiseInference
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.partition.store import HeteroPartitionStore


def typed_feature_range(
    store: HeteroPartitionStore, node_type: str, lo: int, hi: int
) -> npt.NDArray[np.float32]:
    """``[hi - lo, F]`` float32 features of the ``node_type`` ids ``[lo, hi)``."""
    width = store.meta.num_features[node_type]
    if width <= 0:
        raise ValueError(f"node type {node_type!r} has no features in the typed store")
    out = np.zeros((hi - lo, width), dtype=np.float32)
    for p in range(store.num_partitions):
        part = store.partition(p)
        nodes = np.asarray(part.nodes[node_type])  # ascending
        a, b = np.searchsorted(nodes, [lo, hi])
        if a < b:
            out[nodes[a:b] - lo] = np.asarray(part.x[node_type][a:b])
    return out


def hetero_full_accuracy(
    engine: HeteroLayerwiseInference,
    model: RelationalGNN,
    labels: Tensor,
    split_ids: Mapping[str, Tensor],
    splits: Sequence[str],
    all_reduce: AllReduce,
) -> dict[str, float | None]:
    """Each split's accuracy on the target type under full-neighbourhood inference (one
    pass for all splits; None for a split with no nodes). Every rank must call."""
    logits = engine.logits(model)
    lo, hi = engine.share(model.plan.target_node_type)
    predicted = logits.argmax(dim=-1).cpu()
    counts: list[float] = []
    for split in splits:
        ids = split_ids[split].cpu()
        mine = ids[(ids >= lo) & (ids < hi)]
        hit = predicted[mine - lo] == labels.cpu()[mine]
        counts += [float(hit.sum()), float(mine.numel())]
    summed = all_reduce(counts)
    out: dict[str, float | None] = {}
    for i, split in enumerate(splits):
        correct, count = summed[2 * i], summed[2 * i + 1]
        out[split] = correct / count if count else None
    return out


def hetero_full_evaluation(
    model: RelationalGNN,
    engine: Callable[[], HeteroLayerwiseInference],
    *,
    labels: Tensor,
    split_ids: Mapping[str, Tensor],
    rank: int,
    all_reduce: AllReduce,
) -> FullEvaluation:
    """Full-neighbourhood evaluation of ``model`` by this rank, as a :data:`FullEvaluation`;
    ``engine`` builds the inference when it runs. It sets
    ``distgnn_trainer_full_neighbourhood_accuracy`` and emits an eval progress event on rank 0."""

    def evaluate(splits: Sequence[str]) -> dict[str, float | None]:
        start = time.perf_counter()
        figures = hetero_full_accuracy(engine(), model, labels, split_ids, splits, all_reduce)
        report_full(rank, figures, time.perf_counter() - start)
        return figures

    return evaluate


def ids_of(parts: Sequence[Tensor]) -> Tensor:
    """One split's ids, from its per-partition lists."""
    if not parts:
        return torch.zeros(0, dtype=torch.int64)
    return torch.cat([p.cpu() for p in parts])
