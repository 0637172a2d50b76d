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
``--hidden``, learnt ``--embedding-dim`` embeddings for the featureless types (within
``--embedding-memory`` of GPU memory where given, the rest in pinned host memory), ``--fanout``
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
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
# This folder's modules and those of gpu_distributed and gpu (also under python -P).
sys.path[:0] = [str(HERE), str(HERE.parent / "gpu_distributed"), str(HERE.parent / "gpu")]

import bench_runs as runs  # noqa: E402
from bench_args import add_model_args  # noqa: E402
from hetero_run import job_spec  # noqa: E402
from job_run import epoch_figures  # noqa: E402
from ours_edges import sampled_edges_per_seed  # noqa: E402
from records import emit  # noqa: E402
from run_config import RunConfig  # noqa: E402

DEFAULT_RUNS = [
    "worker-1-bf16",
    "worker-2-bf16",
    "server-1-bf16",
    "server-2-bf16",
    "worker-1-fp32",
    "worker-2-fp32",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = runs.bench_parser(
        __doc__, DEFAULT_RUNS, scale_help="syntheticMag scale (1.0: ogbn-mag)", epochs=3
    )
    p.add_argument("--eval-every", type=int, default=1, help="0: only at the end")
    add_model_args(p, fanout=[25, 20], hidden=128, fanout_help="every edge type")
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument(
        "--embedding-memory",
        default=None,
        help="trainers.embeddingMemory of every run: a quantity or auto (embedding shards "
        "over it stay in pinned host memory, read and updated in place by the GPU)",
    )
    p.add_argument(
        "--edges-batches",
        type=int,
        default=0,
        help="batches for our edges per seed per edge type (0: every training seed once)",
    )
    keep = "keep the work dir (the store, for PyG)"
    args = runs.parse_bench_args(
        p, argv, "hetero", fanout="25 20", timeouts=(240.0, 150.0), keep_help=keep
    )
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
    def figures(root: Path) -> dict[str, Any]:
        found = epoch_figures(root, cfg.gpus)
        table_path = root / "profile" / "profile-trainer-0.txt"
        if table_path.exists() and args.out is not None:
            shutil.copyfile(table_path, args.out.parent / f"profile-hetero-{cfg.name}.txt")
            found["profile"] = f"profile-hetero-{cfg.name}.txt"
            trace = root / "profile" / "trace-trainer-0.json.gz"
            if trace.exists():
                shutil.copyfile(trace, args.out.parent / f"trace-hetero-{cfg.name}.json.gz")
        return found

    # the run directory goes: its checkpoint holds every embedding row and its Adam state
    # (GBs at full scale)
    fields = {"bench": "dist_run", "graph": "syntheticMag"}
    extra = {"eval_every": args.eval_every, "embedding_memory": args.embedding_memory}
    return runs.record_run(
        cfg, args, repeat, timeout, job_spec=job_spec, fields=fields, figures=figures, extra=extra
    )


def environment(args: argparse.Namespace, configs: list[RunConfig]) -> dict[str, Any]:
    """The call's environment record."""
    return runs.env_record(
        args,
        "hetero_env",
        gpus_visible=torch.cuda.device_count() if args.device == "cuda" else 0,
        env=args.env,
        scale=args.scale,
        model="rsage",
        layers=len(args.fanout),
        **runs.arg_fields(
            args, "fanout", "batch_size", "hidden", "embedding_dim", "epochs", "eval_every"
        ),
        repeats=args.repeats,
        partitions={r.name: r.gpus for r in configs},
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def edges_per_seed(stores: dict[int, Path]) -> None:
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

    return runs.run_bench(
        args,
        env=environment,
        data_bench="hetero_data",
        run_bench="dist_run",
        job_spec=job_spec,
        run_one=run_one,
        describe=store_counts,
        with_stores=edges_per_seed,
    )


if __name__ == "__main__":
    sys.exit(main())
