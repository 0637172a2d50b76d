"""Baselines: PyG's loader (CPU workers) + PyG GraphSAGE, stock and best effort.

The same synthetic graph as ``pipeline_bench.py`` (generated on the device), the same
fanouts, batch size and model width (3-layer GraphSAGE, hidden 256, Adam). Two setups
(``pyg_setups.py`` says what each keeps where):

- ``stock`` (the default): ``NeighborLoader`` collating host features in its workers;
  by default fp32, untrimmed, timed over ``--batches`` mini-batches after ``--warmup``
  (``pyg_loader``: the loader alone; ``pyg_train``: end to end);
- ``best``: features and labels resident on the device, the loader returning node ids
  only (pinned, persistent workers, prefetch 4), gathered on the device; whole epochs
  timed after ``--warmup-epochs``; any of fp32 / bf16 autocast and PyG's trimmed forward
  (``trim_to_layer``); plus ``pyg_step``, the training step alone over pre-sampled batches.

Every configuration (worker count x precision x trim) runs ``--repeats`` times; its JSON
line holds every run, the median (``seeds_per_s``), min, max and spread. ``--budget``
skips, with a ``pyg_skipped`` line, what would not end in time. A table goes to stderr.

    python benchmarks/gpu/pyg_baseline.py --workers 12 --repeats 3 --out pyg.jsonl   # stock
    python benchmarks/gpu/pyg_baseline.py --setup best --workers 16 12 --precision bf16 \\
        --trim on --repeats 3 --budget 180 --out pyg.jsonl
    # without torch-sparse, e.g. on a laptop: the same loops over NodeLoader + our sampler
    python benchmarks/gpu/pyg_baseline.py --sampler distgnn --device cpu --nodes 20000 --edges 200000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pyg_setups import (
    SAMPLERS,
    SETUPS,
    Graph,
    build_graph,
    build_loader,
    build_node_sampler,
    close_loader,
    sampling_backend,
)
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
from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES

# Left for stopping the workers and the table once the budget says stop.
BUDGET_MARGIN_S = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--setup", choices=SETUPS, default="stock")
    p.add_argument(
        "--device", default="cuda", help="where the model trains (the graph is generated here too)"
    )
    p.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    p.add_argument(
        "--edges",
        type=int,
        default=PRODUCTS_UNDIRECTED_EDGES,
        help="undirected edges (stored twice)",
    )
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--classes", type=int, default=47)
    p.add_argument("--train-fraction", type=float, default=0.08)
    p.add_argument("--fanout", type=int, nargs="+", default=[15, 10, 5])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument(
        "--workers", type=int, nargs="+", default=[12], help="loader worker counts (a sweep)"
    )
    p.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32"])
    p.add_argument(
        "--trim",
        nargs="+",
        choices=["off", "on"],
        default=["off"],
        help="on: PyG's trim_to_layer forward (per-hop counts from the sampler, or derived "
        "from torch-sparse's hop-ordered output)",
    )
    p.add_argument("--repeats", type=int, default=1, help="timed runs per configuration")
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="whole epochs per run; 0 times --batches batches instead "
        "(default: 0 for stock, 1 for best)",
    )
    p.add_argument("--warmup-epochs", type=int, default=1, help="per worker count, with --epochs")
    p.add_argument(
        "--warmup",
        type=int,
        default=8,
        help="warm-up batches before the timed windows, and warm-up steps of each model",
    )
    p.add_argument("--batches", type=int, default=40, help="batches per run when --epochs is 0")
    p.add_argument(
        "--step-batches",
        type=int,
        default=None,
        help="pre-sampled batches for pyg_step, the step alone; 0: none "
        "(default: 0 for stock, 16 for best)",
    )
    p.add_argument("--step-passes", type=int, default=2, help="passes over them per pyg_step run")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds for the whole script, graph included: what would not end in time is skipped",
    )
    p.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="pyg",
        help="pyg: NeighborLoader (needs torch-sparse or pyg-lib); distgnn: NodeLoader + PyGNeighborSampler",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.epochs is None:
        args.epochs = 0 if args.setup == "stock" else 1
    if args.step_batches is None:
        args.step_batches = 0 if args.setup == "stock" else 16
    for name in ("repeats", "batches", "step_passes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("epochs", "warmup_epochs", "warmup", "step_batches"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be 0 or more")
    if any(w < 0 for w in args.workers):
        p.error("--workers: worker counts must be 0 or more")
    if args.budget is not None and args.budget <= BUDGET_MARGIN_S:
        p.error(f"--budget must be more than {BUDGET_MARGIN_S:.0f} seconds")
    return args


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


class Bench:
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

    def skipped(self, what: dict[str, Any], estimate: float | None) -> None:
        rec = {"bench": "pyg_skipped", "reason": "time budget", **self.common, **what}
        rec["estimated_s"] = None if estimate is None else round(estimate, 1)
        rec["left_s"] = round(self.budget.left(), 1)
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
    def run(self) -> None:
        epoch_s: float | None = None
        for workers in self.args.workers:
            epoch_s = self.run_workers(workers, epoch_s)

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
            setup=a.setup,
            sampler=a.sampler,
            fanout=a.fanout,
            batch_size=a.batch_size,
            workers=workers,
            hop_counts=self.hop_counts,
            pin=self.device.type == "cuda",
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


def table(rows: list[dict[str, Any]]) -> str:
    """A short human-readable view of the configuration records."""
    head = f"{'bench':<11} {'setup':<6} {'workers':>7} {'prec':<5} {'trim':<5} "
    head += f"{'seeds/s':>9} {'min':>9} {'max':>9} {'spread':>7} {'wait':>6} runs"
    lines = [head]
    for r in rows:
        w = r.get("workers", "-")
        trim = {True: "on", False: "off"}.get(r.get("trim"), "-")
        tag = f"{r['bench']:<11} {r['setup']:<6} {w!s:>7} {r.get('precision', '-'):<5} {trim:<5} "
        if r["bench"] == "pyg_skipped":
            need = "" if r["estimated_s"] is None else f" (needs ~{r['estimated_s']} s)"
            lines.append(tag + f"skipped: {r['reason']}{need}, {r['left_s']} s left")
            continue
        lines.append(
            tag
            + f"{r['seeds_per_s']:>9.0f} {r['seeds_per_s_min']:>9.0f} {r['seeds_per_s_max']:>9.0f}"
            + f" {100 * r['spread']:>6.1f}% {100 * r['data_wait_share']:>5.1f}%"
            + f" {r['repeats']}x{r['per_run']} {r['timing']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    budget = Budget(args.budget, process_started())
    main_start = time.perf_counter()
    device = torch.device(args.device)
    backend = sampling_backend(args.sampler)
    graph = build_graph(
        setup=args.setup,
        device=device,
        nodes=args.nodes,
        edges=args.edges,
        features=args.features,
        classes=args.classes,
        train_fraction=args.train_fraction,
        seed=args.seed,
    )
    bench = Bench(args, graph, backend, budget)
    import torch_geometric

    emit(
        args.out,
        {
            "bench": "pyg_env",
            "setup": args.setup,
            "sampler": args.sampler,
            "backend": backend,
            "torch": torch.__version__,
            "pyg": torch_geometric.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "cpus": os.cpu_count(),
            "nodes": graph.num_nodes,
            "directed_edges": graph.num_directed_edges,
            "train_nodes": int(graph.train_idx.numel()),
            "setup_seconds": round(time.perf_counter() - main_start, 2),
            "process_seconds": round(time.perf_counter() - budget.start, 2),
            "workers": args.workers,
            "precision": args.precision,
            "trim": args.trim,
            "repeats": args.repeats,
            "epochs": args.epochs,
            "budget_s": args.budget,
            "fanout": args.fanout,
            "batch_size": args.batch_size,
        },
    )
    bench.run()
    print(table(bench.summaries), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
