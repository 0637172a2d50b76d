"""Checkpoints: atomic round trip, latest.json, pruning, and falling back past a broken file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from distgnn_workload.runtime.checkpoint import (
    LATEST_FILE,
    CheckpointError,
    checkpoint_dir,
    checkpoint_path,
    load_latest,
    save_checkpoint,
)


def _model_state(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return torch.nn.Linear(4, 3).state_dict()


def test_round_trip_restores_the_state_and_epoch(tmp_path: Path) -> None:
    state = _model_state(1)
    save_checkpoint(tmp_path, 3, {"model": state, "history": [{"epoch": 3}]})
    ckpt = load_latest(tmp_path)
    assert ckpt is not None
    assert ckpt.epoch == 3
    assert ckpt.path == checkpoint_path(tmp_path, 3)
    for key, value in state.items():
        assert torch.equal(ckpt.state["model"][key], value)
    assert ckpt.state["history"] == [{"epoch": 3}]
    latest = json.loads((checkpoint_dir(tmp_path) / LATEST_FILE).read_text())
    assert latest["epoch"] == 3
    assert latest["file"] == "epoch-3.pt"


def test_no_checkpoint_yet_is_none(tmp_path: Path) -> None:
    assert load_latest(tmp_path) is None


def test_keeps_only_the_newest_files_and_no_temporaries(tmp_path: Path) -> None:
    for epoch in (1, 2, 3, 4):
        save_checkpoint(tmp_path, epoch, {"model": _model_state(epoch)}, keep=2)
    names = sorted(p.name for p in checkpoint_dir(tmp_path).iterdir())
    assert names == ["epoch-3.pt", "epoch-4.pt", LATEST_FILE]
    ckpt = load_latest(tmp_path)
    assert ckpt is not None
    assert ckpt.epoch == 4


def test_a_torn_newest_file_falls_back_to_the_previous(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, {"model": _model_state(1)})
    save_checkpoint(tmp_path, 2, {"model": _model_state(2)})
    checkpoint_path(tmp_path, 2).write_bytes(b"torn write")
    ckpt = load_latest(tmp_path)
    assert ckpt is not None
    assert ckpt.epoch == 1


def test_only_unreadable_files_is_an_error_naming_them(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, {"model": _model_state(1)})
    checkpoint_path(tmp_path, 1).write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"epoch-1\.pt"):
        load_latest(tmp_path)
