"""Heterogeneous training throughput: the real entry points on the MAG-shaped graph, started as
``distgnn run`` starts them, on 1 and 2 GPUs.

The job's own partition step (``python -m distgnn_workload.partition``, from the launch
plan) generates ``syntheticMag`` at ``--scale`` (1.0: ogbn-mag's size; 736,389 papers with
128 features and 349 classes, 1,134,649 authors, 8,740 institutions and 59,965 fields of
study without features, four relations plus their ``rev_`` reverses) and writes one typed
store with random partitions, one per GPU (a heterogeneous job has one partition per holder:
per trainer in worker mode, per sampler in server-client mode), so one store per GPU count
of ``--runs``, the partition steps running side by side; every run of that count reuses it. Each run of ``--runs`` (``mode-gpus-precision``, as in
``benchmarks/gpu_distributed``) renders the job with the operator's builders and starts its
pods through the launch plan of ``distgnn run`` (``distgnn_operator.local.job_plan``), one
trainer per GPU with NCCL: 2-layer R-SAGE (``to_hetero(GraphSAGE)`` semantics), hidden
``--hidden``, learnt ``--embedding-dim`` embeddings for the featureless types, ``--fanout``
for every edge type, batch ``--batch-size`` per GPU, ``--epochs`` epochs of which the first is
warm-up, evaluation every ``--eval-every`` epochs; in server-client mode one sampler per GPU
beside its trainer. A run the launch plan refuses is recorded as ``skipped`` with the
refusal. ``--repeats N`` runs each configuration N times; the summary gives the median and
min-max of seeds/s per GPU and the 1 -> N GPU scaling (``benchmarks/gpu_distributed/summary.py``).

Per run (JSON lines, ``bench: dist_run``): seeds/s per GPU, sampled edges per seed (all edge
types), the data-wait shares, GPU utilisation and ``gpu_contexts``, test accuracy. Once per
call (``bench: hetero_edges_per_seed``): sampled edges per seed per edge type of the
trainers' sampler over the store's training seeds (``ours_edges.py``), which
``summary.py`` compares with PyG's (``pyg_hetero.py``, run on the kept store).

    python benchmarks/gpu_hetero/bench.py --repeats 3 --keep --out results/hetero.jsonl
    python benchmarks/gpu_hetero/bench.py --device cpu --scale 0.002 --runs worker-1-fp32
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# This folder's modules and those of gpu_distributed and gpu (also under python -P).
sys.path[:0] = [
    str(HERE),
    str(REPO / "benchmarks" / "gpu_distributed"),
    str(REPO / "benchmarks" / "gpu"),
]

from hetero_run import job_spec, partition_plan, plan, refusal  # noqa: E402
from job_run import (  # noqa: E402
    STATS_FILE,
    epoch_figures,
    log_tail,
    run_processes,
    run_side_by_side,
)
from ours_edges import sampled_edges_per_seed  # noqa: E402
from records import emit  # noqa: E402
from run_config import RunConfig, parse_run  # noqa: E402
from summary import summarise, table  # noqa: E402

from distgnn_api import contract as c  # noqa: E402

DEFAULT_RUNS = [
    "worker-1-bf16",
    "worker-2-bf16",
    "server-1-bf16",
    "server-2-bf16",
    "worker-1-fp32",
    "worker-2-fp32",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--scale", type=float, default=1.0, help="syntheticMag scale (1.0: ogbn-mag)")
    p.add_argument("--graph-seed", type=int, default=0)
    p.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="mode-gpus-precision, in order")
    p.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    p.add_argument("--eval-every", type=int, default=1, help="0: only at the end")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanout", type=int, nargs="+", default=[25, 20], help="every edge type")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument("--sampler-workers", type=int, default=4, help="server-client mode")
    p.add_argument(
        "--edges-batches",
        type=int,
        default=0,
        help="batches for our edges per seed per edge type (0: every training seed once)",
    )
    p.add_argument("--partition-timeout", type=float, default=240.0)
    p.add_argument("--run-timeout", type=float, default=150.0, help="past it a run is 'hung'")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-hetero-bench"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the work dir (the store, for PyG)")
    p.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    try:
        args.env = dict(item.split("=", 1) for item in args.env)
    except ValueError:
        p.error("--env: write each as KEY=VALUE")
    if args.repeats < 1:
        p.error("--repeats: must be at least 1")
    if args.eval_every < 0:
        p.error("--eval-every: must be 0 or more")
    if not args.scale > 0:
        p.error("--scale: must be positive")
    if len(args.fanout) < 1 or any(k < 1 for k in args.fanout):
        p.error("--fanout: one positive fanout per layer, e.g. --fanout 25 20")
    return args


def build_stores(args: argparse.Namespace, configs: list[RunConfig]) -> dict[int, Path]:
    """The typed store of each GPU count (a heterogeneous job has one partition per holder:
    per GPU), each written by the job's own partition step as ``distgnn run`` starts it; the
    missing ones are built at the same time. A complete store is reused."""
    cuda = args.device == "cuda"
    stores: dict[int, Path] = {}
    pending = []
    for gpus in sorted({r.gpus for r in configs}):
        spec = job_spec(next(r for r in configs if r.gpus == gpus), args, cuda, gpus)
        stores[gpus] = c.partition_dir(args.work_dir / "data", c.partition_key(spec))
        if (stores[gpus] / c.SUCCESS_MARKER).exists():
            emit(args.out, {"bench": "hetero_data", "store": str(stores[gpus]), "reused": True})
        else:
            pending.append((gpus, partition_plan(spec, args, args.work_dir / f"partition-{gpus}")))
    t0 = time.perf_counter()
    status = run_side_by_side([job.partition for _, job in pending], args.partition_timeout)
    for gpus, job in pending:
        record: dict[str, Any] = {
            "bench": "hetero_data",
            "store": str(stores[gpus]),
            "status": status,
            "partitions": gpus,
            "scale": args.scale,
            "partition_steps_in_parallel": len(pending),
            "partition_step_s": round(time.perf_counter() - t0, 1),
        }
        if status != "ok":
            record["log_tail"] = {s.name: log_tail(s.log_path) for s in job.partition}
            emit(args.out, record)
            raise SystemExit(f"the partition step {status}; see {args.out or 'the record above'}")
        meta = json.loads((stores[gpus] / "META.json").read_text())
        record["node_counts"] = meta.get("node_counts")
        record["edge_counts"] = meta.get("edge_counts")
        emit(args.out, record)
    return stores


def run_one(
    cfg: RunConfig, args: argparse.Namespace, *, repeat: int, timeout: float
) -> dict[str, Any]:
    root = args.work_dir / "runs" / f"{cfg.name}-{repeat}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    job = plan(cfg, args, cfg.gpus, root, profile=repeat == 0 and cfg.name in args.profile)
    logs = {s.name: s.log_path for s in job.workload}
    run = run_processes(job.workload, cuda=args.device == "cuda", timeout=timeout)
    record: dict[str, Any] = {
        "bench": "dist_run",
        "graph": "syntheticMag",
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "repeat": repeat,
        "eval_every": args.eval_every,
        "status": run.status,
        "wall_s": run.wall_s,
    }
    record.update(run.gpu)
    if run.status != "ok" or not (root / STATS_FILE).exists():
        record["status"] = "failed" if run.status == "ok" else run.status
        record["error"] = f"exit codes {run.codes}"
        if run.stuck:
            record["stacks"] = run.stuck
        record["log_tail"] = {name: log_tail(path) for name, path in logs.items()}
        return record
    record.update(epoch_figures(root, cfg.gpus))
    table_path = root / "profile" / "profile-trainer-0.txt"
    if table_path.exists() and args.out is not None:
        shutil.copyfile(table_path, args.out.parent / f"profile-hetero-{cfg.name}.txt")
        record["profile"] = f"profile-hetero-{cfg.name}.txt"
    # the checkpoint holds every embedding row and its Adam state (GBs at full scale)
    shutil.rmtree(root, ignore_errors=True)
    return record


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (KINDS.md)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    configs = [parse_run(t) for t in args.runs]
    if args.device == "cpu":  # bf16 needs a GPU
        configs = [r for r in configs if r.precision == "fp32"]
    if not configs:
        raise SystemExit("--runs: no run left to do (bf16 runs need --device cuda)")
    gpus = max(r.gpus for r in configs)
    if args.device == "cuda" and torch.cuda.device_count() < gpus:
        print(f"need {gpus} GPUs, have {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    emit(
        args.out,
        {
            "bench": "hetero_env",
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "gpus_visible": torch.cuda.device_count() if args.device == "cuda" else 0,
            "cpus": os.cpu_count(),
            "env": args.env,
            "scale": args.scale,
            "model": "rsage",
            "layers": len(args.fanout),
            "fanout": args.fanout,
            "batch_size": args.batch_size,
            "hidden": args.hidden,
            "embedding_dim": args.embedding_dim,
            "epochs": args.epochs,
            "eval_every": args.eval_every,
            "repeats": args.repeats,
            "partitions": {r.name: r.gpus for r in configs},
        },
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    stores = build_stores(args, configs)
    edges = sampled_edges_per_seed(
        stores[min(stores)],
        fanout=args.fanout,
        batch_size=args.batch_size,
        device=torch.device(args.device),
        max_batches=args.edges_batches,
    )
    emit(args.out, edges)
    if args.device == "cuda":
        torch.cuda.empty_cache()
    records: list[dict[str, Any]] = []
    for cfg in configs:
        refused = refusal(job_spec(cfg, args, args.device == "cuda", cfg.gpus))
        if refused is not None:
            emit(args.out, {"bench": "dist_run", "run": cfg.name, "skipped": refused})
            continue
        for repeat in range(args.repeats):
            left = args.budget - (time.perf_counter() - started)
            if left < 30:
                emit(
                    args.out,
                    {"bench": "dist_run", "run": cfg.name, "repeat": repeat, "skipped": "budget"},
                )
                break
            record = run_one(cfg, args, repeat=repeat, timeout=min(args.run_timeout, left))
            emit(args.out, record)
            records.append(record)
    table(summarise(args, records))
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
