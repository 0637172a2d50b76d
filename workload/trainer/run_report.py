"""How a rank reports its run: each epoch's figures (metrics, progress tracker, log line),
the tracker after a resume, and the node task's final result (the link task's is
:mod:`~distgnn_workload.trainer.link_report`'s)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from distgnn_api.contract import Result, rfc3339_now
from distgnn_workload import evaluation
from distgnn_workload.trainer.epoch_stats import EpochStats, announce_epoch

if TYPE_CHECKING:
    from distgnn_workload.trainer.loop import Trainer
    from distgnn_workload.trainer.rank_loop import RankLoop


def report_resumed(t: RankLoop) -> None:
    """After a resume, the tracker starts from the last epoch the checkpoint holds."""
    if t.tracker is not None and t.state.history:
        h = t.state.history[-1]
        t.tracker.update(
            epoch=t.start_epoch,
            seeds_per_second=t._job_seeds_per_second(),
            loss=h.get("loss"),
            **t._validation_fields(h.get("val_accuracy")),
        )


def report_epoch(t: RankLoop, stats: EpochStats) -> None:
    """An epoch's figures: the metrics, the progress tracker and (rank 0) the log line."""
    m = t.metrics
    m.epoch.set(stats.epoch)
    m.loss.set(stats.loss)
    job_rate = t._job_seeds_per_second()
    if t.tracker is not None:
        t.tracker.update(
            epoch=stats.epoch,
            seeds_per_second=job_rate,
            loss=stats.loss,
            **t._validation_fields(stats.val_accuracy),
            **m.feature_figures(),
        )
    if t.rank == 0:
        announce_epoch(
            stats,
            epochs=t.spec.training.epochs,
            world_size=t.world_size,
            val_figure=t.VAL_FIGURE,
        )


def accuracy_result(t: Trainer, epochs: int, last_val: float | None) -> Result:
    """Evaluate the final model and report it (the node task); ``last_val``: the last
    validation figure."""
    # the final figures, full-neighbourhood or sampled as training.evaluation says
    final = evaluation.final_accuracies(
        t._evaluation_spec,
        sampled=lambda split: t.evaluate(t.val_ids if split == "val" else t.test_ids, split),
        full=t._full_evaluation(),
        has_val=t._has_val(),
        last_val=last_val,
    )
    result = run_result(
        t,
        epochs,
        test_accuracy=final.test,
        test_accuracy_kind=final.test_kind,
        val_accuracy=final.val,
        val_accuracy_kind=final.val_kind,
    )
    if t.tracker is not None:
        t.tracker.update(
            epoch=epochs,
            seeds_per_second=result.seeds_per_second,
            **t.metrics.feature_figures(),
            val_accuracy=final.val,
            val_accuracy_kind=final.val_kind,
            test_accuracy=final.test,
            test_accuracy_kind=final.test_kind,
        )
    return result


def run_result(t: RankLoop, epochs: int, **figures: Any) -> Result:
    """The job's result: the task's final ``figures``, the job's training rate and times."""
    return Result(
        job_uid=t.job_uid,
        epochs=epochs,
        seeds_per_second=t._job_seeds_per_second(),
        elapsed_seconds=time.time() - t.state.started_at,
        finished_at=rfc3339_now(),
        **figures,
    )
