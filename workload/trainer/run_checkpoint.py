"""A training run's checkpoint: the model, its optimizer and the run's history
(:class:`~distgnn_workload.trainer.epoch_stats.RunState`), written by rank 0 and read back by
every rank on a restart."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from distgnn_workload.runtime.checkpoint import load_latest, save_checkpoint
from distgnn_workload.runtime.lifecycle import BadInputError
from distgnn_workload.trainer.epoch_stats import RunState

log = logging.getLogger("distgnn_workload.trainer.loop")


@dataclass(frozen=True)
class Restored:
    """What a checkpoint gave back: the epochs it holds and the run's history."""

    epochs_done: int
    state: RunState


def restore_run(
    run_dir: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    device: torch.device,
    started_at: float,
) -> Restored | None:
    """Load the newest checkpoint of ``run_dir`` into ``model`` and ``optimizer`` (None: no
    checkpoint). A checkpoint of another model is bad input: the error says how to start
    over. ``started_at``: the run's start where the checkpoint has none."""
    ckpt = load_latest(run_dir, map_location=device)
    if ckpt is None:
        return None
    try:
        model.load_state_dict(ckpt.state["model"])
        optimizer.load_state_dict(ckpt.state["optimizer"])
    except (KeyError, RuntimeError, ValueError) as err:
        raise BadInputError(
            f"checkpoint {ckpt.path} does not fit this job's model ({err}); the job spec "
            "changed since it was written: move the run's checkpoints away to start over"
        ) from None
    state = RunState(
        started_at=float(ckpt.state.get("started_at", started_at)),
        history=list(ckpt.state.get("history", [])),
    )
    log.info("resumed from %s: %d epochs done", ckpt.path.name, ckpt.epoch)
    return Restored(ckpt.epoch, state)


def save_run(
    run_dir: Path,
    epochs_done: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: RunState,
    *,
    job_uid: str,
) -> Path:
    """Write the checkpoint after ``epochs_done`` epochs (rank 0 only); its path."""
    path = save_checkpoint(
        run_dir,
        epochs_done,
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "started_at": state.started_at,
            "history": state.history,
            "job_uid": job_uid,
        },
    )
    log.info("checkpoint %s written", path.name)
    return path
