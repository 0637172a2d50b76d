"""What one epoch measured, and what survives a restart through the checkpoint."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


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
