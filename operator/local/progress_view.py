"""Progress bars for the children's ``@@distgnn`` progress lines.

On a terminal each stage (generation, partitioning, each epoch, ...) gets a rich bar with
the figures the event carries (seeds/s, loss, accuracy) while it runs. When a stage finishes,
its bar becomes one line, so that a long run scrolls like a training log; off a terminal (CI
logs, pipes) only those lines are printed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from distgnn_api.contract import ProgressEvent, Role

# Figures shown beside a bar, in this order, with their label and format.
_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("seeds_per_second", "seeds/s", "{:,.0f}"),
    ("loss", "loss", "{:.4f}"),
    ("accuracy", "acc", "{:.3f}"),
    ("val_accuracy", "val", "{:.3f}"),
    ("test_accuracy", "test", "{:.3f}"),
)


def format_figures(metrics: dict[str, float]) -> str:
    """'12,345 seeds/s  loss 0.5321  acc 0.871' for the figures an event carries."""
    parts = []
    for key, label, fmt in _FIGURES:
        if key in metrics:
            value = fmt.format(metrics[key])
            parts.append(f"{value} {label}" if key == "seeds_per_second" else f"{label} {value}")
    return "  ".join(parts)


def _label(source: str, event: ProgressEvent) -> str:
    label = event.stage
    if "epoch" in event.metrics:
        epoch = int(event.metrics["epoch"])
        epochs = event.metrics.get("epochs")
        label = f"{label} {epoch}/{int(epochs)}" if epochs else f"{label} {epoch}"
    return f"{source} {label}" if source else label


def _is_done(event: ProgressEvent) -> bool:
    return event.total is not None and event.done >= event.total


@dataclass
class _Bar:
    task: TaskID | None
    started: float
    finished: bool = False


class ProgressView:
    """Draws progress events: a live bar per (process, stage, epoch) on a terminal, and a
    line when a stage finishes (the only output off a terminal)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self._bars: dict[str, _Bar] = {}
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[figures]}"),
            console=console,
            transient=False,
            disable=not self.live,
        )

    def __enter__(self) -> ProgressView:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def show(self, role: Role, rank: int, event: ProgressEvent) -> None:
        """Update the bar of this event's stage; a finished stage becomes a line above the bars."""
        # Trainer 0 speaks for the job; the other trainers' lines stay in their logs.
        if role is Role.trainer and rank != 0:
            return
        speaks_for_job = (role, rank) in ((Role.trainer, 0), (Role.partitioner, 0))
        label = _label("" if speaks_for_job else f"{role.value}-{rank}", event)
        figures = format_figures(event.metrics)
        bar = self._bars.get(label)
        if bar is None:
            task = (
                self._progress.add_task(label, total=event.total, figures=figures)
                if self.live
                else None
            )
            bar = self._bars[label] = _Bar(task, time.monotonic())
        if bar.finished:
            return
        if bar.task is not None:
            self._progress.update(
                bar.task, completed=event.done, total=event.total, figures=figures
            )
        if _is_done(event):
            bar.finished = True
            if bar.task is not None:
                self._progress.remove_task(bar.task)
            took = time.monotonic() - bar.started
            self.message(f"[green]✓[/] {label} done in {took:.1f}s  {figures}".rstrip())

    def running(self) -> list[str]:
        """Labels of the bars drawn now (stages under way)."""
        return [task.description for task in self._progress.tasks]

    def message(self, text: str) -> None:
        """A line above the bars (or a plain line)."""
        self._progress.console.print(text, highlight=False)
