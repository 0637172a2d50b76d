"""Link-prediction training throughput and ranking time: the real entry points on the
citation2-shaped graph, started as ``distgnn run`` starts them, on 1 and 2 GPUs.

The job's own partition step generates ``syntheticLink`` at ``--scale`` (1.0: ogbl-citation2's
2,927,963 nodes, 30,561,187 edges and 128 features), splits its edges (5% valid, 5% test,
1000 fixed negatives each) and writes one store per GPU count (one partition per GPU,
random), side by side; every run of that count reuses it. Each run of ``--runs``
(``mode-gpus-precision``) starts the job's trainers (and, server-client, one sampler per GPU)
through the launch plan of ``distgnn run``, one trainer per GPU with NCCL: ``len(--fanout)``-
layer GraphSAGE, hidden ``--hidden``, the ``--decoder``, batch ``--batch-size`` positive edges
per GPU with ``--negatives`` uniform negatives each, ``--epochs`` epochs of which the first is
warm-up (``--positives-per-gpu`` bounds an epoch: ``linkPrediction.positivesPerEpoch``, a
fresh random subset of the training positives each epoch), then the final ranking evaluation of valid and test (each at most
``--eval-positives`` positives against ``--eval-negatives`` fixed negatives).

Per run (JSON lines, ``bench: link_run``): seed rows/s and positive edges/s per GPU, the
data-wait shares, test MRR and Hits@K, and ``final_ranking_eval_s``: the wall time of the
final ranking evaluation (full-neighbourhood embeddings of every node, then valid and test
ranked: 2 x ``--eval-positives`` positives). ``summary.py`` of gpu_distributed gives the
median and spread per configuration and the 1 -> N GPU scaling (in seed rows/s).

    python benchmarks/gpu_link/bench.py --repeats 2 --keep --out results/link.jsonl
    python benchmarks/gpu_link/bench.py --device cpu --scale 0.001 --runs worker-1-fp32
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [
    str(HERE),
    str(REPO / "benchmarks" / "gpu_distributed"),
    str(REPO / "benchmarks" / "gpu"),
]

from job_run import log_tail, run_processes, run_side_by_side  # noqa: E402
from link_run import STATS_FILE, job_spec, link_figures, partition_plan, plan  # noqa: E402
from records import emit  # noqa: E402
from run_config import RunConfig, parse_run  # noqa: E402
from summary import summarise, table  # noqa: E402

from distgnn_api import contract as c  # noqa: E402
from distgnn_operator.local.job_plan import UnsupportedJobError, check_supported  # noqa: E402
from distgnn_workload.sampling.seed_edges import LinkLayout  # noqa: E402

DEFAULT_RUNS = ["worker-1-bf16", "worker-2-bf16", "server-1-bf16", "server-2-bf16"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--scale", type=float, default=1.0, help="syntheticLink scale (1.0: citation2)")
    p.add_argument("--graph-seed", type=int, default=0)
    p.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="mode-gpus-precision, in order")
    p.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    p.add_argument("--epochs", type=int, default=2, help="the first is warm-up")
    p.add_argument("--batch-size", type=int, default=1024, help="positive edges per GPU")
    p.add_argument("--negatives", type=int, default=1, help="training negatives per positive")
    p.add_argument(
        "--positives-per-gpu",
        type=int,
        default=None,
        help="an epoch's positives per GPU (linkPrediction.positivesPerEpoch = this x GPUs); "
        "unset: every training positive",
    )
    p.add_argument("--fanout", type=int, nargs="+", default=[15, 10, 5])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--decoder", default="dot", choices=["dot", "mlp"])
    p.add_argument("--eval-negatives", type=int, default=1000)
    p.add_argument("--eval-positives", type=int, default=100_000, help="per split")
    p.add_argument("--sampler-workers", type=int, default=4, help="server-client mode")
    p.add_argument("--partition-timeout", type=float, default=300.0)
    p.add_argument("--run-timeout", type=float, default=200.0, help="past it a run is 'hung'")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-link-bench"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the work dir (the stores)")
    p.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    try:
        args.env = dict(item.split("=", 1) for item in args.env)
    except ValueError:
        p.error("--env: write each as KEY=VALUE")
    if args.repeats < 1:
        p.error("--repeats: must be at least 1")
    if args.positives_per_gpu is not None and args.positives_per_gpu < 1:
        p.error("--positives-per-gpu: must be at least 1")
    if not args.scale > 0:
        p.error("--scale: must be positive")
    if not args.fanout or any(k < 1 for k in args.fanout):
        p.error("--fanout: one positive fanout per layer, e.g. --fanout 15 10 5")
    return args


def build_stores(args: argparse.Namespace, configs: list[RunConfig]) -> dict[int, Path]:
    """The store of each GPU count, each written by the job's own partition step; the
    missing ones side by side. A complete store is reused."""
    cuda = args.device == "cuda"
    stores: dict[int, Path] = {}
    pending = []
    for gpus in sorted({r.gpus for r in configs}):
        spec = job_spec(next(r for r in configs if r.gpus == gpus), args, cuda, gpus)
        stores[gpus] = c.partition_dir(args.work_dir / "data", c.partition_key(spec))
        if (stores[gpus] / c.SUCCESS_MARKER).exists():
            emit(args.out, {"bench": "link_data", "store": str(stores[gpus]), "reused": True})
        else:
            pending.append((gpus, partition_plan(spec, args, args.work_dir / f"partition-{gpus}")))
    t0 = time.perf_counter()
    status = run_side_by_side([job.partition for _, job in pending], args.partition_timeout)
    for gpus, job in pending:
        record: dict[str, Any] = {
            "bench": "link_data",
            "store": str(stores[gpus]),
            "status": status,
            "partitions": gpus,
            "scale": args.scale,
            "partition_step_s": round(time.perf_counter() - t0, 1),
        }
        if status != "ok":
            record["log_tail"] = {s.name: log_tail(s.log_path) for s in job.partition}
            emit(args.out, record)
            raise SystemExit(f"the partition step {status}; see {args.out or 'the record above'}")
        emit(args.out, record)
    return stores


def run_one(
    cfg: RunConfig, args: argparse.Namespace, *, repeat: int, timeout: float
) -> dict[str, Any]:
    root = args.work_dir / "runs" / f"{cfg.name}-{repeat}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    job = plan(cfg, args, root, profile=repeat == 0 and cfg.name in args.profile)
    run = run_processes(job.workload, cuda=args.device == "cuda", timeout=timeout)
    record: dict[str, Any] = {
        "bench": "link_run",
        "graph": "syntheticLink",
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "repeat": repeat,
        "status": run.status,
        "wall_s": run.wall_s,
    }
    record.update(run.gpu)
    if run.status != "ok" or not (root / STATS_FILE).exists():
        record["status"] = "failed" if run.status == "ok" else run.status
        record["error"] = f"exit codes {run.codes}"
        if run.stuck:
            record["stacks"] = run.stuck
        record["log_tail"] = {s.name: log_tail(s.log_path) for s in job.workload}
        return record
    per = LinkLayout.seeds_per_positive(args.negatives, "uniform")
    record.update(link_figures(root, cfg.gpus, per))
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
            "bench": "link_env",
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "cpus": os.cpu_count(),
            "scale": args.scale,
            "model": "sage",
            "fanout": args.fanout,
            "hidden": args.hidden,
            "decoder": args.decoder,
            "batch_size": args.batch_size,
            "negatives": args.negatives,
            "positives_per_gpu": args.positives_per_gpu,
            "eval_negatives": args.eval_negatives,
            "eval_positives": args.eval_positives,
            "epochs": args.epochs,
            "repeats": args.repeats,
        },
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    build_stores(args, configs)
    records: list[dict[str, Any]] = []
    for cfg in configs:
        try:
            check_supported(job_spec(cfg, args, args.device == "cuda", cfg.gpus))
        except UnsupportedJobError as exc:
            emit(args.out, {"bench": "link_run", "run": cfg.name, "skipped": str(exc)})
            continue
        for repeat in range(args.repeats):
            left = args.budget - (time.perf_counter() - started)
            if left < 30:
                emit(args.out, {"bench": "link_run", "run": cfg.name, "skipped": "budget"})
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
