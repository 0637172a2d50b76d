"""What one epoch measured, and what survives a restart through the checkpoint."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from distgnn_api.contract import STAGE_EPOCH, emit_progress

log = logging.getLogger("distgnn_workload.trainer.loop")


@dataclass
class EpochStats:
    """One epoch's figures, summed over every rank."""

    epoch: int
    seeds: int
    edges: int
    steps: int
    seconds: float
    data_wait_seconds: float
    """Mean over ranks of the time the training step waited for data (GPU stream stall on
    GPUs, host wait on CPU)."""
    host_wait_seconds: float
    """Mean over ranks of the time the host waited for the next mini-batch."""
    loss: float
    val_accuracy: float | None = None
    fastest_rank_seconds: float | None = None
    """The epoch time of the fastest rank (``seconds`` is the slowest's)."""
    feature_bytes: int = 0
    """Bytes of remote features the ranks pulled from each other in the epoch's steps (the
    rows, and the ids they sent), summed over ranks."""
    eager_steps: int = 0
    """Steps the ranks ran eagerly instead of replaying their fixed-shape step (a batch over
    its caps or embedding blocks), summed over ranks."""

    @property
    def seeds_per_second(self) -> float:
        return self.seeds / self.seconds if self.seconds > 0 else 0.0


@dataclass
class RunState:
    """What survives a restart through the checkpoint."""

    started_at: float = field(default_factory=time.time)
    history: list[dict[str, Any]] = field(default_factory=list)

    def train_seconds(self) -> float:
        return sum(float(h["seconds"]) for h in self.history)

    def seeds(self) -> int:
        return sum(int(h["seeds"]) for h in self.history)


def announce_epoch(
    stats: EpochStats, *, epochs: int, world_size: int, val_figure: str = "val_accuracy"
) -> None:
    """Rank 0's epoch figures: the progress event ``distgnn run`` and the operator read, and
    the log line."""
    figures: dict[str, float] = {
        "epoch": stats.epoch,
        "epochs": epochs,
        "seeds_per_second": stats.seeds_per_second,
        "loss": stats.loss,
        "data_wait_share": stats.data_wait_seconds / max(stats.seconds, 1e-9),
    }
    if stats.val_accuracy is not None:
        figures[val_figure] = stats.val_accuracy
    steps = stats.steps // max(world_size, 1)
    emit_progress(STAGE_EPOCH, steps, steps, None, **figures)
    log.info(
        "epoch %d: loss %.4f, %.0f seeds/s, %.0f edges/s, data wait %.1f%%%s%s",
        stats.epoch,
        stats.loss,
        stats.seeds_per_second,
        stats.edges / max(stats.seconds, 1e-9),
        100 * stats.data_wait_seconds / max(stats.seconds, 1e-9),
        "" if stats.val_accuracy is None else f", val {stats.val_accuracy:.4f}",
        ""
        if not stats.feature_bytes
        else f", remote features {stats.feature_bytes / max(stats.steps, 1) / 1e6:.2f} MB/step",
    )
