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
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_args import add_graph_args, add_model_args, graph_options
from pyg_setups import SAMPLERS, SETUPS, build_graph, sampling_backend
from pyg_sweep import BUDGET_MARGIN_S, Bench, Budget, emit, process_started
from synthetic_gpu import PRODUCTS_UNDIRECTED_EDGES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--setup", choices=SETUPS, default="stock")
    p.add_argument(
        "--device", default="cuda", help="where the model trains (the graph is generated here too)"
    )
    add_graph_args(
        p, edges_default=PRODUCTS_UNDIRECTED_EDGES, edges_help="undirected edges (stored twice)"
    )
    add_model_args(p)
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
    graph = build_graph(setup=args.setup, device=device, **graph_options(args))
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
