"""What the user sees of the children's progress lines."""

from __future__ import annotations

import io
import re

from rich.console import Console

from distgnn_api.contract import STAGE_EPOCH, STAGE_GENERATE, ProgressEvent, Role
from distgnn_operator.local.progress_view import ProgressView, format_figures


def _event(stage: str, done: float, total: float | None, **metrics: float) -> ProgressEvent:
    return ProgressEvent(stage=stage, done=done, total=total, metrics=metrics)


def test_figures_are_formatted_in_a_fixed_order() -> None:
    text = format_figures({"accuracy": 0.8712, "loss": 0.53214, "seeds_per_second": 12345.6})
    assert text == "12,346 seeds/s  loss 0.5321  acc 0.871"
    assert format_figures({"unknown": 1.0}) == ""


def test_plain_output_prints_one_line_per_finished_stage() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with ProgressView(console) as view:
        assert not view.live
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 5, 10))
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 10, 10))
        for epoch in (1, 2):
            view.show(Role.trainer, 0, _event(STAGE_EPOCH, 3, 4, epoch=epoch, epochs=2))
            view.show(
                Role.trainer,
                0,
                _event(STAGE_EPOCH, 4, 4, epoch=epoch, epochs=2, loss=0.5, seeds_per_second=900),
            )
            # Other trainers' lines stay in their logs.
            view.show(Role.trainer, 1, _event(STAGE_EPOCH, 4, 4, epoch=epoch, epochs=2))
        view.show(Role.sampler, 1, _event("load", 1, 1))
    lines = out.getvalue().splitlines()
    patterns = [
        r"✓ generate done in \d+\.\ds",
        r"✓ epoch 1/2 done in \d+\.\ds  900 seeds/s  loss 0\.5000",
        r"✓ epoch 2/2 done in \d+\.\ds  900 seeds/s  loss 0\.5000",
        r"✓ sampler-1 load done in \d+\.\ds",
    ]
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns, strict=True):
        assert re.fullmatch(pattern, line), line


def test_terminal_output_draws_a_bar_per_stage_and_epoch() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with ProgressView(console) as view:
        assert view.live
        view.show(Role.partitioner, 0, _event(STAGE_GENERATE, 10, 10))
        view.show(Role.trainer, 0, _event(STAGE_EPOCH, 2, 4, epoch=1, epochs=3, accuracy=0.75))
        running = view.running()
    # The finished stage became a line; the running epoch is a bar with its figures.
    assert running == ["epoch 1/3"]
    text = out.getvalue()
    assert "generate done in" in text
    assert "epoch 1/3" in text
    assert "acc 0.750" in text
