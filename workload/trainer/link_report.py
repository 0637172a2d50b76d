"""How a link-prediction rank trains, validates and reports (:class:`LinkRanking`): its
loss, MRR instead of accuracy, the metrics, the progress event, the log line, the result and
the tracker. Shared by the homogeneous (:class:`~distgnn_workload.trainer.link_loop.LinkTrainer`)
and the typed (:class:`~distgnn_workload.trainer.link_loop.HeteroLinkTrainer`) loops, which
only differ in their inputs, their fixed-shape step and their inference
(``Trainer._inference``); both draw an epoch's positives as ``positivesPerEpoch`` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from torch import Tensor

from distgnn_api.contract import STAGE_EVAL, LinkFigures, Result, emit_progress
from distgnn_api.link import LinkPrediction
from distgnn_workload.evaluation.link_ranking import LinkMetrics, LinkSplit, evaluate_splits
from distgnn_workload.models.link import LinkModel, link_loss
from distgnn_workload.runtime.seeds import epoch_subset
from distgnn_workload.trainer.loop import Trainer
from distgnn_workload.trainer.run_report import run_result

log = logging.getLogger(__name__)

SPLITS = ("val", "test")


class LinkRanking(Trainer):
    """The link path's validation and result on top of a training loop: a subclass sets
    ``splits`` (the valid and test positives, ``"val"`` and ``"test"``) and ``link_model``;
    :meth:`_rank` ranks them over the full-neighbourhood embeddings of the trainer's
    inference (every rank calls it, with the same splits)."""

    VAL_FIGURE = "val_mrr"
    splits: dict[str, LinkSplit]
    link: LinkPrediction
    link_model: LinkModel

    def _loss(self, x: Any, batch: Any) -> Tensor:
        """The step's loss: binary cross-entropy of the positives' and negatives' scores."""
        with self.autocast():
            pos, neg = self.ddp(x, batch.hop)
        return link_loss(pos, neg)

    def _epoch_train_ids(self, epoch: int) -> Sequence[Tensor]:
        """``positivesPerEpoch``: a fresh random subset of the training positives each epoch."""
        return epoch_subset(
            self.train_ids,
            self.link.positives_per_epoch,
            epoch=epoch,
            seed=self.spec.training.seed,
        )

    def link_to(self, model: LinkModel, splits: Mapping[str, LinkSplit]) -> None:
        """Train ``model`` and rank ``splits`` (at most ``maxPositives`` of each)."""
        link = self.spec.link_prediction
        if link is None:
            raise ValueError("a link-prediction job needs spec.linkPrediction")
        self.link = link
        self.link_model = model
        self.splits = nonempty(splits, link.evaluation.max_positives)

    def _rank(self, splits: Mapping[str, LinkSplit]) -> dict[str, LinkMetrics]:
        engine, _ = self._inference()
        model = self.link_model
        return evaluate_splits(
            engine,
            model.encoder,
            model.decoder,
            splits,
            self.link.evaluation.hits_at,
            self.collectives.all_gather,
            model.edge_type,
        )

    def rank_splits(self, names: tuple[str, ...]) -> dict[str, LinkMetrics]:
        """MRR and Hits@K of the named splits (every rank must call)."""
        wanted = {n: self.splits[n] for n in names if n in self.splits}
        if not wanted:
            return {}
        start = time.perf_counter()
        return report_ranking(self, self._rank(wanted), start)

    def _validate(self) -> float:
        figures = self.rank_splits(("val",))
        return figures["val"].mrr if "val" in figures else 0.0

    def _validation_fields(self, figure: float | None) -> dict[str, Any]:
        return {"val_mrr": figure}

    def _final_result(self, epochs: int, last_val: float | None) -> Result:
        return link_result(self, self.rank_splits(SPLITS), epochs, last_val)


def report_ranking(
    trainer: Trainer, figures: Mapping[str, LinkMetrics], started: float
) -> dict[str, LinkMetrics]:
    """Export the figures and (rank 0) emit and log them; ``started``: perf_counter()."""
    for name, m in figures.items():
        trainer.metrics.link_figures(name, m.mrr, m.hits)
    if trainer.rank == 0:
        emit_progress(STAGE_EVAL, 1, 1, None, **{f"{n}_mrr": m.mrr for n, m in figures.items()})
        log.info(
            "ranking evaluation in %.1f s: %s",
            time.perf_counter() - started,
            "; ".join(f"{n} {link_figures(m).summary()}" for n, m in figures.items()),
        )
    return dict(figures)


def link_result(
    trainer: Trainer, figures: Mapping[str, LinkMetrics], epochs: int, last_val: float | None
) -> Result:
    """The job's result from the final figures, reported to the tracker as well."""
    test = link_figures(figures["test"]) if "test" in figures else None
    val = link_figures(figures["val"]) if "val" in figures else None
    result = run_result(trainer, epochs, test_link=test, val_link=val)
    if trainer.tracker is not None:
        trainer.tracker.update(
            epoch=epochs,
            seeds_per_second=result.seeds_per_second,
            val_mrr=val.mrr if val is not None else last_val,
            test_mrr=test.mrr if test is not None else None,
            test_hits=test.hits if test is not None else None,
        )
    return result


def first_positives(split: LinkSplit, cap: int | None) -> LinkSplit:
    """The first ``cap`` positives (the store's order is fixed: a fixed subset)."""
    src, dst, neg = split
    if cap is None or src.numel() <= cap:
        return split
    return src[:cap], dst[:cap], None if neg is None else neg[:cap]


def nonempty(splits: Mapping[str, LinkSplit], cap: int | None) -> dict[str, LinkSplit]:
    """The splits that have positives, each cut to ``cap``."""
    out = {}
    for name, split in splits.items():
        first: Tensor = split[0]
        if first.numel():
            out[name] = first_positives(split, cap)
    return out


def link_figures(m: LinkMetrics) -> LinkFigures:
    return LinkFigures(mrr=m.mrr, hits={str(k): v for k, v in m.hits.items()}, positives=m.count)
