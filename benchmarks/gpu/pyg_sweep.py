"""The sweep of the PyG baselines: one loader per worker count, its configurations, the budget.

Each configuration (precision x trim) trains a fresh model on the worker count's loader and
repeats its timed run; ``pyg_step`` times the step alone once, on the first batches the
first loader gave. Every record goes out as a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from pyg_setups import Graph, build_loader, build_node_sampler, close_loader
from pyg_timing import (
    Batch,
    DeviceGather,
    Prepare,
    Run,
    Trainer,
    from_stock,
    summarise,
    timed,
    timed_step,
)

# Left for stopping the workers and the table once the budget says stop.
BUDGET_MARGIN_S = 5.0


def emit(out: Path | None, record: dict[str, Any]) -> None:
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(line + "\n")


def process_started() -> float:
    """When this process started, on the ``time.perf_counter`` clock (imports count too)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        age = 0.0  # not Linux: from main() on
    return time.perf_counter() - max(0.0, age)


class Budget:
    """Seconds left of ``--budget``; whether a run of a given length still fits."""

    def __init__(self, seconds: float | None, start: float) -> None:
        self.seconds, self.start = seconds, start

    def left(self) -> float:
        if self.seconds is None:
            return float("inf")
        return self.seconds - BUDGET_MARGIN_S - (time.perf_counter() - self.start)

    def fits(self, estimate: float | None) -> bool:
        return self.left() >= (estimate or 0.0)


def endless(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


class WorkerSweep:
    """A sweep over ``--workers``: one loader per worker count and its configurations, each
    recorded, or recorded as skipped when the budget would not see it through."""

    args: argparse.Namespace
    budget: Budget
    device: torch.device
    common: dict[str, Any]
    summaries: list[dict[str, Any]]

    def loader_options(self, workers: int) -> dict[str, Any]:
        """The loader's keyword arguments shared by the homogeneous and typed setups."""
        a = self.args
        return {
            "setup": a.setup,
            "sampler": a.sampler,
            "fanout": a.fanout,
            "batch_size": a.batch_size,
            "workers": workers,
            "pin": self.device.type == "cuda",
        }

    def skipped(self, what: dict[str, Any], estimate: float | None) -> None:
        rec = {"bench": "pyg_skipped", "reason": "time budget", **self.common, **what}
        rec["estimated_s"] = None if estimate is None else round(estimate, 1)
        rec["left_s"] = round(self.budget.left(), 1)
        emit(self.args.out, rec)
        self.summaries.append(rec)

    def run(self) -> None:
        estimate: float | None = None
        for workers in self.args.workers:
            estimate = self.run_workers(workers, estimate)

    def run_workers(self, workers: int, estimate: float | None) -> float | None:
        """Every configuration of ``workers``; returns the estimate for the next count."""
        raise NotImplementedError


class Bench(WorkerSweep):
    """The configurations of one setup, over one loader per worker count."""

    def __init__(
        self, args: argparse.Namespace, graph: Graph, backend: str, budget: Budget
    ) -> None:
        self.args, self.graph, self.budget = args, graph, budget
        self.device = torch.device(args.device)
        self.node_sampler = build_node_sampler(
            graph, sampler=args.sampler, fanout=args.fanout, seed=args.seed
        )
        self.configs = [(p, t == "on") for p in args.precision for t in args.trim]
        # best: every batch carries per-hop counts, so pyg_step covers the trimmed forward
        self.hop_counts = args.setup == "best" or any(trim for _, trim in self.configs)
        self.stepped = False
        self.common = {"setup": args.setup, "sampler": args.sampler, "backend": backend}
        self.stash: list[Batch] = []
        self.summaries: list[dict[str, Any]] = []
        self.gathers: dict[str, DeviceGather] = {}
        if args.setup == "best":
            x32 = graph.x.float()
            self.gathers["fp32"] = DeviceGather(x32, graph.y)
            # a bf16 run keeps its features in bf16, as our pipeline does
            self.gathers["bf16"] = DeviceGather(x32.bfloat16(), graph.y)

    # -- helpers -------------------------------------------------------------------
    def prepare(self, precision: str) -> Prepare:
        if self.args.setup == "stock":
            return from_stock
        return self.gathers[precision]

    def trainer(self, precision: str, trim: bool) -> Trainer:
        a = self.args
        return Trainer(
            features=a.features,
            hidden=a.hidden,
            layers=len(a.fanout),
            classes=a.classes,
            device=self.device,
            precision=precision,
            trim=trim,
            seed=a.seed,
        )

    def record(self, bench: str, fields: dict[str, Any], runs: list[Run]) -> None:
        rec = {"bench": bench, **self.common, **fields, "repeats_requested": self.args.repeats}
        rec["repeats"] = len(runs)
        rec.update(summarise(runs))
        emit(self.args.out, rec)
        self.summaries.append(rec)

    def repeat(
        self, what: dict[str, Any], run: Callable[[], Run], estimate: float | None
    ) -> list[Run]:
        """Up to ``--repeats`` runs while each still fits the budget (estimate: the last)."""
        runs: list[Run] = []
        for _ in range(self.args.repeats):
            if not self.budget.fits(estimate):
                break
            runs.append(run())
            estimate = runs[-1].seconds
        if not runs:
            self.skipped(what, estimate)
        return runs

    def warm(self, trainer: Trainer, precision: str, stream: Iterator[Any] | None) -> None:
        """``--warmup`` steps: from the stream, or over the stash (no loader batches)."""
        prepare = self.prepare(precision)
        for i in range(self.args.warmup):
            if stream is not None:
                trainer.step(prepare(next(stream), self.device))
            elif self.stash:
                trainer.step(self.as_precision(self.stash[i % len(self.stash)], precision))

    def as_precision(self, b: Batch, precision: str) -> Batch:
        if self.args.setup == "best" and precision == "bf16" and b.x.dtype != torch.bfloat16:
            return Batch(
                b.x.bfloat16(), b.y, b.edge_index, b.batch_size, b.nodes_per_hop, b.edges_per_hop
            )
        return b

    # -- the sweep -----------------------------------------------------------------
    def run_workers(self, workers: int, epoch_s: float | None) -> float | None:
        a = self.args
        need = None if epoch_s is None else epoch_s * (a.warmup_epochs + a.epochs)
        if a.epochs and not self.budget.fits(need):
            for precision, trim in self.configs:
                self.skipped({"workers": workers, "precision": precision, "trim": trim}, need)
            return epoch_s
        loader = build_loader(
            self.graph,
            self.node_sampler,
            hop_counts=self.hop_counts,
            **self.loader_options(workers),
        )
        try:
            if a.epochs:
                return self.run_epochs(loader, workers, epoch_s)
            self.run_windows(loader, workers)
            return epoch_s
        finally:
            close_loader(loader)

    def run_windows(self, loader: Any, workers: int) -> None:
        """The stock measurement: windows of ``--batches`` from an endless stream of epochs."""
        a = self.args
        stream = endless(loader)
        for _ in range(a.warmup):
            next(stream)
        if not self.stash and a.step_batches:
            fill = self.prepare("fp32")
            self.stash = [fill(next(stream), self.device) for _ in range(a.step_batches)]
            self.step_alone()
        what = {"workers": workers, "timing": "batches", "per_run": a.batches}
        loads = self.repeat(what, lambda: timed(stream, a.batches, device=self.device), None)
        if loads:
            self.record("pyg_loader", what, loads)
        estimate = loads[-1].seconds if loads else None
        for precision, trim in self.configs:
            cfg = {**what, "precision": precision, "trim": trim}
            if not self.budget.fits(estimate):
                self.skipped(cfg, estimate)
                continue
            trainer = self.trainer(precision, trim)
            prepare = self.prepare(precision)
            self.warm(trainer, precision, stream)

            def window(trainer: Trainer = trainer, prepare: Prepare = prepare) -> Run:
                return timed(
                    stream, a.batches, device=self.device, prepare=prepare, trainer=trainer
                )

            runs = self.repeat(cfg, window, estimate)
            if runs:
                self.record("pyg_train", cfg, runs)
                estimate = runs[-1].seconds

    def run_epochs(self, loader: Any, workers: int, epoch_s: float | None) -> float | None:
        """Whole epochs, after ``--warmup-epochs`` that start the workers (and fill the stash)."""
        a = self.args
        warm_trainer, fill = self.trainer(*self.configs[0]), self.prepare("fp32")
        for _ in range(a.warmup_epochs):
            start = time.perf_counter()
            for batch in loader:
                b = fill(batch, self.device)
                if len(self.stash) < max(1, a.step_batches):
                    self.stash.append(b)
                warm_trainer.step(b)
            epoch_s = time.perf_counter() - start
        del warm_trainer
        self.step_alone()
        for precision, trim in self.configs:
            cfg = {"workers": workers, "precision": precision, "trim": trim}
            cfg.update(timing="epochs", per_run=a.epochs)
            estimate = None if epoch_s is None else epoch_s * a.epochs
            if not self.budget.fits(estimate):
                self.skipped(cfg, estimate)
                continue
            trainer = self.trainer(precision, trim)
            self.warm(trainer, precision, None)
            prepare = self.prepare(precision)

            def epochs(trainer: Trainer = trainer, prepare: Prepare = prepare) -> Run:
                each = [
                    timed(loader, None, device=self.device, prepare=prepare, trainer=trainer)
                    for _ in range(a.epochs)
                ]
                return Run(
                    sum(r.seconds for r in each),
                    sum(r.batches for r in each),
                    sum(r.seeds for r in each),
                    sum(r.edges for r in each),
                    sum(r.wait for r in each),
                    each[-1].last_loss,
                )

            runs = self.repeat(cfg, epochs, estimate)
            if runs:
                self.record("pyg_train", cfg, runs)
                epoch_s = runs[-1].seconds / a.epochs
        return epoch_s

    def step_alone(self) -> None:
        """The training step alone over the stash, once, as soon as it is filled: fp32 and
        bf16, untrimmed and (where the batches carry per-hop counts) trimmed."""
        a = self.args
        batches = self.stash[: a.step_batches]
        if self.stepped or not batches:
            return
        self.stepped = True
        trims = (False, True) if batches[0].nodes_per_hop is not None else (False,)
        estimate: float | None = None
        for precision, trim in [(p, t) for p in ("fp32", "bf16") for t in trims]:
            cfg = {"precision": precision, "trim": trim, "timing": "step"}
            cfg.update(per_run=a.step_passes * len(batches))
            if not self.budget.fits(estimate):
                self.skipped(cfg, estimate)
                continue
            trainer = self.trainer(precision, trim)
            local = [self.as_precision(b, precision) for b in batches]
            self.warm(trainer, precision, None)
            runs = self.repeat(
                cfg, lambda t=trainer, bs=local: timed_step(t, bs, a.step_passes), None
            )
            if runs:
                self.record("pyg_step", cfg, runs)
                estimate = runs[-1].seconds
