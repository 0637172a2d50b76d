"""Heterogeneous training throughput: the real entry points on the MAG-shaped graph, started as
``distgnn run`` starts them, on 1 and 2 GPUs.

The job's own partition step (``python -m distgnn_workload.partitioner``, from the launch
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

import bench_runs as runs  # noqa: E402
from hetero_run import job_spec  # noqa: E402
from job_run import epoch_figures  # noqa: E402
from ours_edges import sampled_edges_per_seed  # noqa: E402
from records import emit  # noqa: E402
from run_config import RunConfig, workload_plan  # noqa: E402

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
    runs.add_run_args(p, DEFAULT_RUNS)
    p.add_argument("--scale", type=float, default=1.0, help="syntheticMag scale (1.0: ogbn-mag)")
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    p.add_argument("--eval-every", type=int, default=1, help="0: only at the end")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanout", type=int, nargs="+", default=[25, 20], help="every edge type")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument(
        "--edges-batches",
        type=int,
        default=0,
        help="batches for our edges per seed per edge type (0: every training seed once)",
    )
    p.add_argument("--partition-timeout", type=float, default=240.0)
    p.add_argument("--run-timeout", type=float, default=150.0, help="past it a run is 'hung'")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-hetero-bench"))
    p.add_argument("--keep", action="store_true", help="keep the work dir (the store, for PyG)")
    args = p.parse_args(argv)
    runs.check_run_args(p, args, "25 20")
    if args.eval_every < 0:
        p.error("--eval-every: must be 0 or more")
    return args


def store_counts(store: Path, steps_in_parallel: int) -> dict[str, Any]:
    """A typed store's node and edge counts per type, from its META.json."""
    meta = json.loads((store / "META.json").read_text())
    return {
        "partition_steps_in_parallel": steps_in_parallel,
        "node_counts": meta.get("node_counts"),
        "edge_counts": meta.get("edge_counts"),
    }


def run_one(
    cfg: RunConfig, args: argparse.Namespace, repeat: int, timeout: float
) -> dict[str, Any]:
    root = runs.fresh_run_dir(args, cfg, repeat)
    spec = job_spec(cfg, args, args.device == "cuda", cfg.gpus)
    job = workload_plan(spec, args, root, profile=repeat == 0 and cfg.name in args.profile)
    record: dict[str, Any] = {
        "bench": "dist_run",
        "graph": "syntheticMag",
        **runs.config_fields(cfg, repeat),
        "eval_every": args.eval_every,
    }
    if not runs.run_job(job, root, args, record, timeout=timeout):
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
    runs.start_preload(args)
    configs = runs.run_configs(args)
    if configs is None:
        return 2
    emit(
        args.out,
        runs.env_record(
            args,
            "hetero_env",
            gpus_visible=torch.cuda.device_count() if args.device == "cuda" else 0,
            env=args.env,
            scale=args.scale,
            model="rsage",
            layers=len(args.fanout),
            fanout=args.fanout,
            batch_size=args.batch_size,
            hidden=args.hidden,
            embedding_dim=args.embedding_dim,
            epochs=args.epochs,
            eval_every=args.eval_every,
            repeats=args.repeats,
            partitions={r.name: r.gpus for r in configs},
        ),
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    stores = runs.build_stores(
        args, configs, bench="hetero_data", job_spec=job_spec, describe=store_counts
    )
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
    records = runs.run_all(
        args, configs, started=started, bench="dist_run", job_spec=job_spec, run_one=run_one
    )
    runs.finish(args, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
