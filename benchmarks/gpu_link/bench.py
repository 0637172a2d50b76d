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
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "gpu_distributed"), str(HERE.parent / "gpu")]

import bench_runs as runs  # noqa: E402
from bench_args import add_model_args  # noqa: E402
from link_run import job_spec, link_figures  # noqa: E402
from run_config import RunConfig  # noqa: E402

from distgnn_workload.sampling.seed_edges import LinkLayout  # noqa: E402

DEFAULT_RUNS = ["worker-1-bf16", "worker-2-bf16", "server-1-bf16", "server-2-bf16"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = runs.bench_parser(
        __doc__, DEFAULT_RUNS, scale_help="syntheticLink scale (1.0: citation2)", epochs=2
    )
    add_model_args(p, batch_help="positive edges per GPU")
    p.add_argument("--negatives", type=int, default=1, help="training negatives per positive")
    p.add_argument(
        "--positives-per-gpu",
        type=int,
        default=None,
        help="an epoch's positives per GPU (linkPrediction.positivesPerEpoch = this x GPUs); "
        "unset: every training positive",
    )
    p.add_argument("--decoder", default="dot", choices=["dot", "mlp"])
    p.add_argument("--eval-negatives", type=int, default=1000)
    p.add_argument("--eval-positives", type=int, default=100_000, help="per split")
    keep = "keep the work dir (the stores)"
    args = runs.parse_bench_args(
        p, argv, "link", fanout="15 10 5", timeouts=(300.0, 200.0), keep_help=keep
    )
    if args.positives_per_gpu is not None and args.positives_per_gpu < 1:
        p.error("--positives-per-gpu: must be at least 1")
    return args


def run_one(
    cfg: RunConfig, args: argparse.Namespace, repeat: int, timeout: float
) -> dict[str, Any]:
    per = LinkLayout.seeds_per_positive(args.negatives, "uniform")
    fields = {"bench": "link_run", "graph": "syntheticLink"}

    def figures(root: Path) -> dict[str, Any]:
        return link_figures(root, cfg.gpus, per)

    return runs.record_run(
        cfg, args, repeat, timeout, job_spec=job_spec, fields=fields, figures=figures
    )


def environment(args: argparse.Namespace, _: list[RunConfig]) -> dict[str, Any]:
    """The call's environment record."""
    return runs.env_record(
        args,
        "link_env",
        scale=args.scale,
        model="sage",
        **runs.arg_fields(
            args,
            "fanout",
            "hidden",
            "decoder",
            "batch_size",
            "negatives",
            "positives_per_gpu",
            "eval_negatives",
            "eval_positives",
            "epochs",
            "repeats",
        ),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    return runs.run_bench(
        args,
        env=environment,
        data_bench="link_data",
        run_bench="link_run",
        job_spec=job_spec,
        run_one=run_one,
    )


if __name__ == "__main__":
    sys.exit(main())
