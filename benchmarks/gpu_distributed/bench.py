"""Distributed training throughput: the real entry points, started as ``distgnn run`` starts
them, on any number of GPUs.

Generates the products-scale synthetic graph on the GPU (``benchmarks/gpu/synthetic_gpu.py``)
and writes one partition store with random partitions, reused by every run: as many
partitions as the least common multiple of the runs' GPU counts (2 for runs on 1 and 2 GPUs,
4 with a 4-GPU run), so that every run's holders own equal blocks. Each run of ``--runs``
(``mode-gpus-precision[-cacheRatio]``) renders the job with the operator's builders and
starts its pods as local processes through the launch plan of ``distgnn run``
(``distgnn_operator.local.job_plan``), one trainer process per GPU with NCCL:

- worker mode (trainers sample their own partitions; features of other partitions come
  from the hot-feature cache, the rest from their owners) and server-client mode (sampler
  processes, one per GPU, write feature-complete mini-batches into shared slots of the
  trainers; RPC carries requests and sizes);
- 1 to N GPUs (one trainer pod per GPU);
- fp32 and bf16 (autocast, bf16 features); cacheRatio 1 unless given.

Each run trains ``--epochs`` epochs (3-layer GraphSAGE, hidden 256, fanout 15/10/5, batch
1024 per GPU) with evaluation every ``--eval-every`` epochs, as the examples do; the first
epoch is warm-up. ``--repeats N`` runs each configuration N times in this call. From the
trainers' ``training_stats.json`` it reports, as JSON lines: seeds/s per GPU, sampled
edges/s, the data-wait share (how long the training stream stalled for data, over the epoch
time; the host-side wait too), each GPU's utilisation and which process holds a context on
which GPU (``gpu_contexts``, from ``nvidia-smi``), whether the training step ran as a CUDA
graph, how many shared slots were mapped, and the full-neighbourhood test accuracy (on a
graph as hard as ogbn-products: ``benchmarks/accuracy/``). A run that does not finish within
``--run-timeout`` is reported as ``hung``, with the stacks of every process still running
(``py-spy dump`` when it is on PATH, and the workload's faulthandler through SIGUSR1).
Then per configuration the median and spread (min-max) of seeds/s per GPU and of the test
accuracy over the repeats, the scaling from 1 GPU to each larger count (medians, runs of this
call only) and,
with ``--pyg-baseline``, the PyG ``NeighborLoader`` baseline
(``benchmarks/gpu/pyg_baseline.py``) on the same graph (at the ``pyg`` place of ``--runs``)
and the ratios to it. ``--profile RUN...`` writes a torch.profiler table and a chrome trace
of trainer 0's steps 20-40 of its first epoch.

On the device machine (the repository copied there, the wheels of
``../shared/wheels/gpu-py312-torch2.11/`` plus prometheus-client, rich and pytest in a
carried ``.wheels/``; everything within one 10-minute command)::

    pip install -q --no-index --no-deps --target /tmp/site .wheels/*.whl \\
    && mkdir -p build/devpath && ln -sfn ../../api build/devpath/distgnn_api \\
    && ln -sfn ../../workload build/devpath/distgnn_workload \\
    && ln -sfn ../../operator build/devpath/distgnn_operator \\
    && PYTHONPATH=/tmp/site:$PWD/build/devpath NCCL_NVLS_ENABLE=0 \\
       python benchmarks/gpu_distributed/bench.py --pyg-baseline --budget 330 \\
         --repeats 3 --profile worker-1-bf16 --out results/dist.jsonl

The GPU tests run with the same set-up:
``python -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/workload tests/e2e``.
``README.md`` beside this file has the exact command of the reported run and its results.

On CPU at small scale, as a smoke test::

    python benchmarks/gpu_distributed/bench.py --device cpu --nodes 20000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
# This folder's modules and benchmarks/gpu's (also under python -P, which adds neither).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO / "benchmarks" / "gpu")]

from bench_args import add_graph_args, add_model_args  # noqa: E402
from bench_runs import PRELOAD_HELP, check_env_and_repeats  # noqa: E402
from graph_store import build_store  # noqa: E402
from job_run import (  # noqa: E402
    STATS_FILE,
    epoch_figures,
    log_tail,
    preload_cpu_processes,
    run_processes,
)
from records import emit  # noqa: E402
from run_config import RunConfig, job_spec, num_partitions, parse_run, plan  # noqa: E402
from summary import compare, summarise, table  # noqa: E402
from synthetic_gpu import FEATURE_NOISE, HOMOPHILY  # noqa: E402

from distgnn_api import contract as c  # noqa: E402

DEFAULT_RUNS = [
    "worker-1-bf16",
    "worker-2-bf16",
    "worker-1-fp32",
    "worker-2-fp32",
    "server-1-bf16",
    "server-2-bf16",
    "worker-2-bf16-0.2",
    "pyg",
    "server-1-fp32",
    "server-2-fp32",
    "worker-2-fp32-0.2",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    add_graph_args(p, edges_help="undirected; default: products' density")
    p.add_argument("--eval-fraction", type=float, default=0.005, help="val and test each")
    p.add_argument(
        "--homophily",
        type=float,
        default=HOMOPHILY,
        help="share of intra-community edges (default: the spec's, calibrated for 0.70-0.85 "
        "accuracy; 0.8 with --feature-noise 1 is the easy graph of earlier figures)",
    )
    p.add_argument("--feature-noise", type=float, default=FEATURE_NOISE)
    p.add_argument(
        "--runs",
        nargs="+",
        default=DEFAULT_RUNS,
        help="runs in order, as mode-gpus-precision[-cacheRatio]; 'pyg' runs the baseline "
        "there (with --pyg-baseline); a short budget drops the last ones",
    )
    p.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    p.add_argument("--epochs", type=int, default=3, help="the first is warm-up")
    p.add_argument(
        "--eval-every",
        type=int,
        default=1,
        help="evaluate every N epochs, as the examples do (0: only at the end)",
    )
    add_model_args(p)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--sampler-workers", type=int, default=4)
    p.add_argument(
        "--rpc-cuda",
        choices=["auto", "on", "off"],
        default="off",
        help="CUDA tensors over RPC (DISTGNN_RPC_CUDA); bulk data uses shared slots anyway",
    )
    p.add_argument(
        "--feature-memory",
        default=None,
        help="samplers.featureMemory of every run: a quantity, auto, or N%% of one holder's "
        "table (the rest of it stays in pinned host memory, read in place by the GPU)",
    )
    p.add_argument("--run-timeout", type=float, default=120.0, help="past it a run is 'hung'")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--pyg-baseline", action="store_true")
    p.add_argument("--pyg-timeout", type=float, default=130.0)
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-dist-bench"))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--preload", action="store_true", help=PRELOAD_HELP)
    p.add_argument("--keep", action="store_true", help="keep the work dir")
    p.add_argument(
        "--env",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra env for every workload process, e.g. DISTGNN_SEGMENT_KERNEL=torch",
    )
    args = p.parse_args(argv)
    check_env_and_repeats(p, args)
    if args.eval_every < 0:
        p.error("--eval-every: must be 0 or more")
    return args


# --------------------------------------------------------------------------- one run


def run_one(
    cfg: RunConfig,
    args: argparse.Namespace,
    partitions: int,
    *,
    repeat: int,
    rpc_cuda: bool,
    timeout: float,
) -> dict[str, Any]:
    root = args.work_dir / "runs" / f"{cfg.full_name}-{'cuda' if rpc_cuda else 'host'}-rpc-{repeat}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    profile = repeat == 0 and (
        cfg.full_name in args.profile or (cfg.cache_ratio == 1.0 and cfg.name in args.profile)
    )
    job = plan(cfg, args, partitions, root, rpc_cuda=rpc_cuda, profile=profile)
    logs = {s.name: s.log_path for s in job.workload}
    run = run_processes(job.workload, cuda=args.device == "cuda", timeout=timeout)
    record: dict[str, Any] = {
        "bench": "dist_run",
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "feature_memory": args.feature_memory,
        "transport": cfg.transport,
        "repeat": repeat,
        "rpc_cuda": rpc_cuda,
        "eval_every": args.eval_every,
        "status": run.status,
        "wall_s": run.wall_s,
    }
    record.update(run.gpu)
    texts = {name: path.read_text(errors="replace") for name, path in logs.items() if path.exists()}
    fallbacks = [name for name, text in texts.items() if "falling back" in text]
    if fallbacks:
        record["sampler_graph_fallback"] = fallbacks
    trainer0 = texts.get("trainer-0", "")
    if "training step captured in a CUDA graph" in trainer0:
        record["step"] = "cuda graph"
    elif "CUDA graph capture of the training step failed" in trainer0:
        record["step"] = "eager (capture failed)"
    else:
        record["step"] = "eager"
    record["shared_slots_mapped"] = sum(text.count("mapped ") for text in texts.values())
    if run.status != "ok" or not (root / STATS_FILE).exists():
        if run.status == "ok":
            record["status"] = "failed"
        record["error"] = f"exit codes {run.codes}" + (
            f" (still running after {timeout:.0f}s: {sorted(run.stuck)})"
            if run.status == "hung"
            else ""
        )
        if run.stuck:
            record["stacks"] = run.stuck
        record["log_tail"] = {name: log_tail(path) for name, path in logs.items()}
        return record
    record.update(epoch_figures(root, cfg.gpus))
    table = root / "profile" / "profile-trainer-0.txt"
    if table.exists() and args.out is not None:
        target = args.out.parent / f"profile-{cfg.full_name}.txt"
        shutil.copyfile(table, target)
        record["profile"] = target.name
        trace = root / "profile" / "trace-trainer-0.json.gz"
        if trace.exists():
            shutil.copyfile(trace, args.out.parent / f"trace-{cfg.full_name}.json.gz")
    return record


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (KINDS.md)
    if args.preload:
        preload_cpu_processes()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = [t if t == "pyg" else parse_run(t) for t in args.runs]
    if args.device == "cpu":  # bf16 needs a GPU
        runs = [r for r in runs if isinstance(r, str) or r.precision == "fp32"]
    configs = [r for r in runs if isinstance(r, RunConfig)]
    gpus = max((r.gpus for r in configs), default=1)
    if args.device == "cuda" and torch.cuda.device_count() < gpus:
        print(f"need {gpus} GPUs, have {torch.cuda.device_count()}", file=sys.stderr)
        return 2
    partitions = num_partitions(configs)
    emit(
        args.out,
        {
            "bench": "dist_env",
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
            "gpus_visible": torch.cuda.device_count() if args.device == "cuda" else 0,
            "cpus": os.cpu_count(),
            "env": args.env,
            "fanout": args.fanout,
            "batch_size": args.batch_size,
            "hidden": args.hidden,
            "epochs": args.epochs,
            "eval_every": args.eval_every,
            "repeats": args.repeats,
            "partitions": partitions,
        },
    )
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if configs:
        spec = job_spec(configs[0], args, args.device == "cuda", partitions)
        key = c.partition_key(spec)
        build_store(args, c.partition_dir(args.work_dir / "data", key), partitions, key)
    rpc_modes = {"on": [True], "off": [False], "auto": [args.device == "cuda", False]}
    choices = list(dict.fromkeys(rpc_modes[args.rpc_cuda]))
    records: list[dict[str, Any]] = []
    pyg: float | None = None
    pyg_done = False
    if args.pyg_baseline and "pyg" not in runs:
        runs.append("pyg")
    for run in runs:
        if isinstance(run, str):
            if args.pyg_baseline and not pyg_done:
                pyg, pyg_done = pyg_baseline(args, started), True
            continue
        for repeat in range(args.repeats):
            for attempt, rpc_cuda in enumerate(choices):
                left = args.budget - (time.perf_counter() - started)
                if left < 40:
                    emit(
                        args.out,
                        {
                            "bench": "dist_run",
                            "run": run.full_name,
                            "repeat": repeat,
                            "skipped": "budget",
                        },
                    )
                    break
                record = run_one(
                    run,
                    args,
                    partitions,
                    repeat=repeat,
                    rpc_cuda=rpc_cuda,
                    timeout=min(args.run_timeout, left),
                )
                retry = record["status"] == "failed" and attempt + 1 < len(choices)
                if retry:
                    record["retry"] = "with host tensors over RPC"
                emit(args.out, record)
                if not retry:
                    records.append(record)
                    if record["status"] == "ok" and attempt > 0:
                        # CUDA tensors over RPC failed here: later runs use host tensors.
                        choices = choices[attempt:]
                    break
    summaries = summarise(args, records)
    if pyg is not None:
        compare(args, summaries, pyg)
    table(summaries)
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 0


def pyg_baseline(args: argparse.Namespace, started: float) -> float | None:
    """PyG's NeighborLoader + GraphSAGE on the same graph: its seeds/s, or None."""
    left = args.budget - (time.perf_counter() - started)
    if left < 30:
        emit(args.out, {"bench": "pyg_train", "skipped": "time budget"})
        return None
    out = args.work_dir / "pyg.jsonl"
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "gpu" / "pyg_baseline.py"),
        "--device",
        args.device,
        "--nodes",
        str(args.nodes),
        "--workers",
        "12",
        "--out",
        str(out),
    ]
    if args.edges:
        cmd += ["--edges", str(args.edges)]
    try:
        proc = subprocess.run(
            cmd, timeout=min(args.pyg_timeout, left), capture_output=True, text=True
        )
        failed = proc.returncode != 0
        tail = (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        failed, tail = True, "timeout"
    records = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    for rec in records:
        emit(args.out, rec)
    train = next((r for r in records if r.get("bench") == "pyg_train"), None)
    if train is None:
        emit(args.out, {"bench": "pyg_train", "error": tail if failed else "no result"})
        return None
    return float(train["seeds_per_s"])


if __name__ == "__main__":
    sys.exit(main())
