"""Checkpoints on the shared volume: ``<run>/checkpoints/epoch-<n>.pt`` and ``latest.json``.

Trainer rank 0 writes a checkpoint after every ``training.checkpointEvery`` epochs. Each file
is written to a temporary name, synced and renamed, and only then does ``latest.json`` point
at it, so a crash at any moment leaves the previous checkpoint intact. Every rank of a
restarted gang loads the newest readable checkpoint and continues with the next epoch.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from distgnn_api.contract import CHECKPOINT_DIR, dump_json, rfc3339_now

log = logging.getLogger(__name__)

LATEST_FILE = "latest.json"
KEEP_CHECKPOINTS = 2
_NAME = re.compile(r"^epoch-(\d+)\.pt$")


class CheckpointError(RuntimeError):
    """No checkpoint could be read although some exist; the message names the files."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the epochs it completed and its saved state."""

    epoch: int
    state: dict[str, Any]
    path: Path


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINT_DIR


def checkpoint_path(run_dir: str | Path, epoch: int) -> Path:
    return checkpoint_dir(run_dir) / f"epoch-{epoch}.pt"


def save_checkpoint(
    run_dir: str | Path, epoch: int, state: dict[str, Any], *, keep: int = KEEP_CHECKPOINTS
) -> Path:
    """Write the state after ``epoch`` completed epochs atomically and point latest.json at it."""
    folder = checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(run_dir, epoch)
    save_atomically(path, {"epoch": epoch, **state})
    dump_json(folder / LATEST_FILE, {"epoch": epoch, "file": path.name, "savedAt": rfc3339_now()})
    _fsync_dir(folder)
    for old in sorted(_epochs_on_disk(folder), reverse=True)[keep:]:
        checkpoint_path(run_dir, old).unlink(missing_ok=True)
    return path


def save_atomically(path: Path, payload: dict[str, Any]) -> None:
    """``torch.save`` to a temporary name, synced, then renamed: ``path`` is whole or absent."""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_latest(run_dir: str | Path, map_location: str | torch.device = "cpu") -> Checkpoint | None:
    """The newest readable checkpoint, or None when the run has none yet.

    ``latest.json`` names the newest; if that file cannot be read, older ones are tried.
    """
    folder = checkpoint_dir(run_dir)
    if not folder.is_dir():
        return None
    candidates = sorted(_epochs_on_disk(folder), reverse=True)
    latest = _latest_epoch(folder)
    if latest is not None and latest in candidates:
        candidates.remove(latest)
        candidates.insert(0, latest)
    errors: list[str] = []
    for epoch in candidates:
        path = checkpoint_path(run_dir, epoch)
        try:
            state = torch.load(path, map_location=map_location, weights_only=False)
        except Exception as err:  # a torn or foreign file: try the previous one
            errors.append(f"{path}: {err}")
            log.warning("cannot read checkpoint %s: %s", path, err)
            continue
        if not isinstance(state, dict) or state.get("epoch") != epoch:
            errors.append(f"{path}: not a distgnn checkpoint of epoch {epoch}")
            continue
        return Checkpoint(epoch=epoch, state=state, path=path)
    if errors:
        raise CheckpointError(
            "no checkpoint could be read: " + "; ".join(errors) + ". Move the broken files "
            f"out of {folder} to restart training from scratch."
        )
    return None


def _latest_epoch(folder: Path) -> int | None:
    try:
        data = json.loads((folder / LATEST_FILE).read_text())
        return int(data["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _epochs_on_disk(folder: Path) -> list[int]:
    return [int(m.group(1)) for p in folder.iterdir() if (m := _NAME.match(p.name))]


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
