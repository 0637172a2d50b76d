"""What the user sees of the children's progress lines."""

from __future__ import annotations

import io
import re

from rich.console import Console

from distgnn_api.contract import (
    STAGE_EPOCH,
    STAGE_EVAL,
    STAGE_GENERATE,
    STAGE_PARTITION,
    ProgressEvent,
    Role,
)
from distgnn_operator.local.progress_view import ProgressView, format_figures

T0 = (Role.trainer, 0)


def _event(stage: str, done: float, total: float | None, **metrics: float) -> ProgressEvent:
    return ProgressEvent(stage=stage, done=done, total=total, metrics=metrics)


def _epoch(view: ProgressView, epoch: int, loss: float, val: float) -> None:
    """What a trainer prints for one epoch: batches, then validation, then the summary."""
    figures = {"epoch": epoch, "epochs": 2}
    view.show(*T0, _event(STAGE_EPOCH, 2, 4, **figures, seeds_per_second=800))
    view.show(*T0, _event(STAGE_EPOCH, 4, 4, **figures, seeds_per_second=850))
    # Other trainers' lines stay in their logs.
    view.show(Role.trainer, 1, _event(STAGE_EPOCH, 4, 4, **figures, seeds_per_second=1))
    view.show(*T0, _event(STAGE_EVAL, 3, 3, val_accuracy=val))
    view.show(*T0, _event(STAGE_EPOCH, 4, 4, **figures, seeds_per_second=900, loss=loss))


def test_figures_are_formatted_in_a_fixed_order() -> None:
    text = format_figures({"accuracy": 0.8712, "loss": 0.53214, "seeds_per_second": 12345.6})
    assert text == "12,346 seeds/s  loss 0.5321  acc 0.871"
    assert format_figures({"unknown": 1.0}) == ""


def test_plain_output_is_one_line_per_stage_with_the_epoch_figures() -> None:
    out = io.StringIO()
    with ProgressView(Console(file=out, force_terminal=False, width=200)) as view:
        assert not view.live
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 5, 10))
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 10, 10))
        # A finished stage may repeat its last step, with figures: still one line.
        for done in (0.0, 0.5, 1.0, 1.0):
            view.show(Role.partitioner, 0, _event(STAGE_PARTITION, done, 1))
        view.show(Role.partitioner, 0, _event(STAGE_PARTITION, 1, 1, edge_cut_fraction=0.18))
        _epoch(view, 1, loss=0.5, val=0.8)
        _epoch(view, 2, loss=0.4, val=0.82)
        view.show(*T0, _event(STAGE_EVAL, 1, 3))
        view.show(*T0, _event(STAGE_EVAL, 3, 3, test_accuracy=0.85))
        view.show(Role.sampler, 1, _event("load", 1, 1))
        # A stage that never finished (an interrupted run) leaves no line.
        view.show(Role.sampler, 0, _event("load", 0, 1))
    lines = out.getvalue().splitlines()
    took = r"done in \d+\.\ds"
    patterns = [
        rf"✓ generate {took}",
        rf"✓ partition {took}  edge cut 18\.0%",
        rf"✓ epoch 1/2 {took}  900 seeds/s  loss 0\.5000  val 0\.800",
        rf"✓ sampler-1 load {took}",
        rf"✓ epoch 2/2 {took}  900 seeds/s  loss 0\.4000  val 0\.820  test 0\.850",
    ]
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), line


def test_terminal_output_draws_a_bar_per_running_stage() -> None:
    out = io.StringIO()
    with ProgressView(Console(file=out, force_terminal=True, width=160)) as view:
        assert view.live
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 10, 10))
        view.show(*T0, _event(STAGE_EPOCH, 2, 4, epoch=1, epochs=3, accuracy=0.75))
        view.show(*T0, _event(STAGE_EVAL, 1, 2))
        assert view.running() == ["epoch 1/3", "eval"]
        view.show(*T0, _event(STAGE_EPOCH, 1, 4, epoch=2, epochs=3))
        # The new epoch closed the old one (unfinished: no line); eval still runs.
        assert view.running() == ["eval", "epoch 2/3"]
    text = out.getvalue()
    assert "generate done in" in text
    assert "epoch 1/3" in text
    assert "acc 0.750" in text
    assert "epoch 1/3 done" not in text
