"""Progress bars for the children's ``@@distgnn`` progress lines.

On a terminal each stage (generation, partitioning, each epoch, ...) gets a rich bar with
the figures its events carry (seeds/s, loss, accuracy) while it runs. A finished stage
becomes one line, so that a long run scrolls like a training log; off a terminal (CI logs,
pipes) only those lines are printed.

Figures may follow a stage's last step (the trainer reports an epoch's loss and validation
accuracy after its last batch), so a finished stage's line is written when the next stage
starts or the run ends. Evaluation figures (stage ``eval``) join the epoch they follow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

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

from distgnn_api.contract import STAGE_EVAL, ProgressEvent, Role

# Figures shown beside a bar, in this order, with their label and format.
_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("seeds_per_second", "seeds/s", "{:,.0f}"),
    ("loss", "loss", "{:.4f}"),
    ("accuracy", "acc", "{:.3f}"),
    ("val_accuracy", "val", "{:.3f}"),
    ("test_accuracy", "test", "{:.3f}"),
    ("val_mrr", "val MRR", "{:.4f}"),
    ("test_mrr", "test MRR", "{:.4f}"),
    ("data_wait_share", "data wait", "{:.0%}"),
    ("edge_cut_fraction", "edge cut", "{:.1%}"),
)
# Stages whose bars are shown while they run but leave no line: their figures join the epoch.
_FOLDED_STAGES = frozenset({STAGE_EVAL})


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


@dataclass
class _Bar:
    label: str
    stage: str
    per_epoch: bool
    task: TaskID | None
    started: float
    done: float = 0.0
    total: float | None = None
    figures: dict[str, float] = field(default_factory=dict)
    finished_at: float | None = None

    @property
    def complete(self) -> bool:
        return self.total is not None and self.done >= self.total


class ProgressView:
    """Draws progress events: a live bar per (process, stage, epoch) on a terminal, and a
    line when a stage finishes (the only output off a terminal)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self._open: dict[str, _Bar] = {}
        self._epoch_mark: float | None = None
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
        for bar in list(self._open.values()):
            self._close(bar)
        self._progress.stop()

    def show(self, role: Role, rank: int, event: ProgressEvent) -> None:
        """Update the bar of this event's stage, opening and closing bars as stages go."""
        # Trainer 0 speaks for the job; the other trainers' lines stay in their logs.
        if role is Role.trainer and rank != 0:
            return
        speaks_for_job = (role, rank) in ((Role.trainer, 0), (Role.partitioner, 0))
        label = _label("" if speaks_for_job else f"{role.value}-{rank}", event)
        bar = self._open.get(label)
        if bar is not None and not bar.per_epoch and event.done < bar.done:
            self._close(bar)  # the stage starts over (e.g. a second evaluation)
            bar = None
        if bar is None:
            bar = self._start(label, event)
        bar.done, bar.total = event.done, event.total
        bar.figures.update(event.metrics)
        self._draw(bar)
        if not bar.complete:
            return
        if bar.finished_at is None:
            bar.finished_at = time.monotonic()
            if bar.per_epoch:
                self._epoch_mark = bar.finished_at
        if bar.stage in _FOLDED_STAGES:
            epoch = next((b for b in reversed(self._open.values()) if b.per_epoch), None)
            if epoch is not None:
                epoch.figures.update(bar.figures)
                self._draw(epoch)
                self._drop(bar)

    def running(self) -> list[str]:
        """Labels of the bars drawn now (stages under way or epochs not yet closed)."""
        return [task.description for task in self._progress.tasks]

    def message(self, text: str) -> None:
        """A line above the bars (or a plain line)."""
        self._progress.console.print(text, highlight=False)

    # ------------------------------------------------------------------ bars

    def _start(self, label: str, event: ProgressEvent) -> _Bar:
        per_epoch = "epoch" in event.metrics
        for other in list(self._open.values()):
            # Figures may follow a stage's last step, so a finished stage stays open until
            # the next one starts: a new epoch closes the earlier ones, any new stage (but an
            # evaluation, which folds into its epoch) closes the finished ones.
            if other.per_epoch:
                if per_epoch and other.stage == event.stage:
                    self._close(other)
            elif other.complete and event.stage not in _FOLDED_STAGES:
                self._close(other)
        task = self._progress.add_task(label, total=event.total, figures="") if self.live else None
        # An epoch's first event comes a few batches in; it began when the one before ended.
        started = (self._epoch_mark if per_epoch else None) or time.monotonic()
        bar = _Bar(label, event.stage, per_epoch, task, started)
        self._open[label] = bar
        return bar

    def _draw(self, bar: _Bar) -> None:
        if bar.task is not None:
            self._progress.update(
                bar.task,
                completed=bar.done,
                total=bar.total,
                figures=format_figures(bar.figures),
            )

    def _drop(self, bar: _Bar) -> None:
        if bar.task is not None:
            self._progress.remove_task(bar.task)
        del self._open[bar.label]

    def _close(self, bar: _Bar) -> None:
        """Remove a bar; a finished one leaves a line with its time and figures."""
        self._drop(bar)
        if bar.finished_at is None:
            return
        took = bar.finished_at - bar.started
        figures = format_figures(bar.figures)
        self.message(f"[green]✓[/] {bar.label} done in {took:.1f}s  {figures}".rstrip())
