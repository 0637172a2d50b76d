"""The loop of a benchmark on a graph that the job's own partition step generates (the typed
and the link bench): their shared arguments, the stores (one per GPU count, written side by
side and reused), each run's directory, process run and record, and the runs of every
configuration within the time budget."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from job_run import STATS_FILE, log_tail, preload_cpu_processes, run_processes, run_side_by_side
from records import emit
from run_config import RunConfig, parse_run, partition_plan, refusal
from summary import summarise, table

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.local.job_plan import JobPlan

JobSpecFn = Callable[[RunConfig, argparse.Namespace, bool, int], DistGNNJobSpec]


PRELOAD_HELP = (
    "fork the CPU processes (partition steps; on --device=cpu every process) from one "
    "launcher that imported torch once, as distgnn run --preload does"
)


def add_run_args(p: argparse.ArgumentParser, default_runs: list[str]) -> None:
    """The arguments every such bench takes the same way."""
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--graph-seed", type=int, default=0)
    p.add_argument("--runs", nargs="+", default=default_runs, help="mode-gpus-precision, in order")
    p.add_argument("--repeats", type=int, default=1, help="runs of each configuration")
    p.add_argument("--sampler-workers", type=int, default=4, help="server-client mode")
    p.add_argument("--budget", type=float, default=540.0, help="seconds for the whole script")
    p.add_argument("--profile", nargs="*", default=[], help="runs to profile, e.g. worker-1-bf16")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--env", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--preload", action="store_true", help=PRELOAD_HELP)


def start_preload(args: argparse.Namespace) -> None:
    """``--preload``: every later run's CPU processes fork from one zygote."""
    if args.preload:
        preload_cpu_processes()


def check_env_and_repeats(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Parse ``--env`` (KEY=VALUE items into a dict) and refuse fewer than one repeat."""
    try:
        args.env = dict(item.split("=", 1) for item in args.env)
    except ValueError:
        p.error("--env: write each as KEY=VALUE")
    if args.repeats < 1:
        p.error("--repeats: must be at least 1")


def check_run_args(p: argparse.ArgumentParser, args: argparse.Namespace, fanout: str) -> None:
    """Parse ``--env`` and refuse bad repeats, scale or fanout (``fanout``: an example)."""
    check_env_and_repeats(p, args)
    if not args.scale > 0:
        p.error("--scale: must be positive")
    if not args.fanout or any(k < 1 for k in args.fanout):
        p.error(f"--fanout: one positive fanout per layer, e.g. --fanout {fanout}")


def run_configs(args: argparse.Namespace) -> list[RunConfig] | None:
    """The configurations of ``--runs`` this device can run (bf16 needs a GPU); None when
    there are fewer GPUs than a run needs (said on stderr). Keeps NVLink multicast off."""
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
        return None
    return configs


def build_stores(
    args: argparse.Namespace,
    configs: list[RunConfig],
    *,
    bench: str,
    job_spec: JobSpecFn,
    describe: Callable[[Path, int], dict[str, Any]] | None = None,
) -> dict[int, Path]:
    """The store of each GPU count (one partition per GPU), each written by the job's own
    partition step as ``distgnn run`` starts it; the missing ones side by side. A complete
    store is reused. ``describe(store, steps side by side)`` adds figures to its record."""
    cuda = args.device == "cuda"
    stores: dict[int, Path] = {}
    pending = []
    for gpus in sorted({r.gpus for r in configs}):
        spec = job_spec(next(r for r in configs if r.gpus == gpus), args, cuda, gpus)
        stores[gpus] = c.partition_dir(args.work_dir / "data", c.partition_key(spec))
        if (stores[gpus] / c.SUCCESS_MARKER).exists():
            emit(args.out, {"bench": bench, "store": str(stores[gpus]), "reused": True})
        else:
            pending.append((gpus, partition_plan(spec, args, args.work_dir / f"partition-{gpus}")))
    t0 = time.perf_counter()
    status = run_side_by_side([job.partition for _, job in pending], args.partition_timeout)
    for gpus, job in pending:
        record: dict[str, Any] = {
            "bench": bench,
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
        if describe is not None:
            record.update(describe(stores[gpus], len(pending)))
        emit(args.out, record)
    return stores


def fresh_run_dir(args: argparse.Namespace, cfg: RunConfig, repeat: int) -> Path:
    """An empty run directory for one repeat of a configuration."""
    root = args.work_dir / "runs" / f"{cfg.name}-{repeat}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def run_job(
    job: JobPlan,
    root: Path,
    args: argparse.Namespace,
    record: dict[str, Any],
    *,
    timeout: float,
) -> bool:
    """Run the job's workload; ``record`` gets its status, wall time and GPU figures, and on a
    failure (or no training stats) the error, stacks and log tails. True when it finished."""
    logs = {s.name: s.log_path for s in job.workload}
    run = run_processes(job.workload, cuda=args.device == "cuda", timeout=timeout)
    record.update({"status": run.status, "wall_s": run.wall_s})
    record.update(run.gpu)
    if run.status == "ok" and (root / STATS_FILE).exists():
        return True
    record["status"] = "failed" if run.status == "ok" else run.status
    record["error"] = f"exit codes {run.codes}"
    if run.stuck:
        record["stacks"] = run.stuck
    record["log_tail"] = {name: log_tail(path) for name, path in logs.items()}
    return False


def config_fields(cfg: RunConfig, repeat: int) -> dict[str, Any]:
    """The fields of a run record that name its configuration."""
    return {
        "run": cfg.name,
        "mode": cfg.mode,
        "gpus": cfg.gpus,
        "precision": cfg.precision,
        "cache_ratio": cfg.cache_ratio,
        "repeat": repeat,
    }


def env_record(args: argparse.Namespace, bench: str, **fields: Any) -> dict[str, Any]:
    """The record of the call's environment: torch, the device, the CPUs, then ``fields``."""
    return {
        "bench": bench,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "cpus": os.cpu_count(),
        **fields,
    }


def run_all(
    args: argparse.Namespace,
    configs: list[RunConfig],
    *,
    started: float,
    bench: str,
    job_spec: JobSpecFn,
    run_one: Callable[[RunConfig, argparse.Namespace, int, float], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Every repeat of every configuration while the budget lasts: a run ``distgnn run`` would
    refuse, or one without 30 s left, is recorded as skipped. The records of the runs."""
    records: list[dict[str, Any]] = []
    for cfg in configs:
        refused = refusal(job_spec(cfg, args, args.device == "cuda", cfg.gpus))
        if refused is not None:
            emit(args.out, {"bench": bench, "run": cfg.name, "skipped": refused})
            continue
        for repeat in range(args.repeats):
            left = args.budget - (time.perf_counter() - started)
            if left < 30:
                emit(
                    args.out,
                    {"bench": bench, "run": cfg.name, "repeat": repeat, "skipped": "budget"},
                )
                break
            record = run_one(cfg, args, repeat, min(args.run_timeout, left))
            emit(args.out, record)
            records.append(record)
    return records


def finish(args: argparse.Namespace, records: list[dict[str, Any]]) -> None:
    """The summary table of the runs; the work dir goes unless ``--keep``."""
    table(summarise(args, records))
    if not args.keep:
        shutil.rmtree(args.work_dir, ignore_errors=True)
