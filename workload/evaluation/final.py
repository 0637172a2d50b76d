"""The final validation and test figures of a run, each of the kind the spec asks for."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from distgnn_api.contract import STAGE_EVAL, emit_progress
from distgnn_api.spec import EvaluationKind, EvaluationSpec
from distgnn_workload import metrics
from distgnn_workload.evaluation.accuracy import AllReduce, SplitRows, full_neighbourhood_accuracy
from distgnn_workload.evaluation.inference import LayerwiseInference

log = logging.getLogger(__name__)

SampledEvaluation = Callable[[str], float]
"""The trainer's sampled evaluation of a split (``"val"`` or ``"test"``)."""
FullEvaluation = Callable[[Sequence[str]], dict[str, float | None]]
"""Full-neighbourhood accuracy of several splits in one pass."""


@dataclass(frozen=True)
class FinalAccuracies:
    """The figures ``result.json`` and the progress report, each with its kind."""

    test: float
    test_kind: EvaluationKind
    val: float | None
    val_kind: EvaluationKind | None


def final_accuracies(
    spec: EvaluationSpec,
    *,
    sampled: SampledEvaluation,
    full: FullEvaluation,
    has_val: bool,
    last_val: float | None,
) -> FinalAccuracies:
    """Evaluate the final model as ``spec`` says; the full splits share one pass.

    Without validation nodes the last validation figure of training (sampled) is kept.
    """
    full_val = has_val and spec.validation == EvaluationKind.full
    full_test = spec.test == EvaluationKind.full
    splits = [s for s, want in (("val", full_val), ("test", full_test)) if want]
    figures = full(splits) if splits else {}
    val: float | None
    val_kind: EvaluationKind | None
    if full_val:
        val, val_kind = figures["val"], EvaluationKind.full
    elif has_val:
        val, val_kind = sampled("val"), EvaluationKind.sampled
    else:
        val = last_val
        val_kind = EvaluationKind.sampled if last_val is not None else None
    if full_test:
        test, test_kind = figures["test"] or 0.0, EvaluationKind.full
    else:
        test, test_kind = sampled("test"), EvaluationKind.sampled
    return FinalAccuracies(test=test, test_kind=test_kind, val=val, val_kind=val_kind)


Inference = Callable[[], tuple[LayerwiseInference, SplitRows]]
"""Builds, when the evaluation runs, a rank's inference engine and the target type's labels
and split masks (:mod:`distgnn_workload.trainer.evaluation` builds both for either graph
kind)."""


def full_evaluation(
    model: nn.Module, inference: Inference, *, rank: int, all_reduce: AllReduce
) -> FullEvaluation:
    """Full-neighbourhood evaluation of ``model`` by this rank, as a :data:`FullEvaluation`.

    It sets ``distgnn_trainer_full_neighbourhood_accuracy`` and emits an eval progress event
    on rank 0.
    """

    def evaluate(splits: Sequence[str]) -> dict[str, float | None]:
        start = time.perf_counter()
        engine, rows = inference()
        figures = full_neighbourhood_accuracy(engine, model, rows, splits, all_reduce)
        report_full(rank, figures, time.perf_counter() - start)
        return figures

    return evaluate


def report_full(rank: int, figures: dict[str, float | None], seconds: float) -> None:
    """Set ``distgnn_trainer_full_neighbourhood_accuracy`` of each split that has nodes; on
    rank 0, emit an eval progress event and log the figures."""
    found = {s: a for s, a in figures.items() if a is not None}
    for split, accuracy in found.items():
        metrics.TRAINER_FULL_ACCURACY.labels(str(rank), split).set(accuracy)
    if rank == 0:
        emit_progress(STAGE_EVAL, 1, 1, None, **{f"{s}_accuracy": a for s, a in found.items()})
        log.info(
            "full-neighbourhood evaluation in %.1f s: %s",
            seconds,
            ", ".join(f"{s} {a:.4f}" for s, a in found.items()) or "no nodes",
        )
