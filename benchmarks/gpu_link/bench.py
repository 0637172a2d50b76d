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
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [
    str(HERE),
    str(REPO / "benchmarks" / "gpu_distributed"),
    str(REPO / "benchmarks" / "gpu"),
]

import bench_runs as runs  # noqa: E402
from link_run import job_spec, link_figures  # noqa: E402
from records import emit  # noqa: E402
from run_config import RunConfig, workload_plan  # noqa: E402

from distgnn_workload.sampling.seed_edges import LinkLayout  # noqa: E402

DEFAULT_RUNS = ["worker-1-bf16", "worker-2-bf16", "server-1-bf16", "server-2-bf16"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    runs.add_run_args(p, DEFAULT_RUNS)
    p.add_argument("--scale", type=float, default=1.0, help="syntheticLink scale (1.0: citation2)")
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
    p.add_argument("--partition-timeout", type=float, default=300.0)
    p.add_argument("--run-timeout", type=float, default=200.0, help="past it a run is 'hung'")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-link-bench"))
    p.add_argument("--keep", action="store_true", help="keep the work dir (the stores)")
    args = p.parse_args(argv)
    runs.check_run_args(p, args, "15 10 5")
    if args.positives_per_gpu is not None and args.positives_per_gpu < 1:
        p.error("--positives-per-gpu: must be at least 1")
    return args


def run_one(
    cfg: RunConfig, args: argparse.Namespace, repeat: int, timeout: float
) -> dict[str, Any]:
    root = runs.fresh_run_dir(args, cfg, repeat)
    spec = job_spec(cfg, args, args.device == "cuda", cfg.gpus)
    job = workload_plan(spec, args, root, profile=repeat == 0 and cfg.name in args.profile)
    record: dict[str, Any] = {
        "bench": "link_run",
        "graph": "syntheticLink",
        **runs.config_fields(cfg, repeat),
    }
    if not runs.run_job(job, root, args, record, timeout=timeout):
        return record
    per = LinkLayout.seeds_per_positive(args.negatives, "uniform")
    record.update(link_figures(root, cfg.gpus, per))
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
            "link_env",
            scale=args.scale,
            model="sage",
            fanout=args.fanout,
            hidden=args.hidden,
            decoder=args.decoder,
            batch_size=args.batch_size,
            negatives=args.negatives,
            positives_per_gpu=args.positives_per_gpu,
            eval_negatives=args.eval_negatives,
            eval_positives=args.eval_positives,
            epochs=args.epochs,
            repeats=args.repeats,
        ),
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    runs.build_stores(args, configs, bench="link_data", job_spec=job_spec)
    records = runs.run_all(
        args, configs, started=started, bench="link_run", job_spec=job_spec, run_one=run_one
    )
    runs.finish(args, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
