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
from run_config import RunConfig, parse_run, partition_plan, refusal, workload_plan
from summary import summarise, table

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.local.job_plan import JobPlan

JobSpecFn = Callable[[RunConfig, argparse.Namespace, bool, int], DistGNNJobSpec]
RunOneFn = Callable[[RunConfig, argparse.Namespace, int, float], dict[str, Any]]


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


def add_work_args(
    p: argparse.ArgumentParser,
    *,
    partition_timeout: float,
    run_timeout: float,
    work_dir: Path,
    keep_help: str,
) -> None:
    """The partition step's and each run's time limits, the work dir and ``--keep``."""
    p.add_argument("--partition-timeout", type=float, default=partition_timeout)
    p.add_argument("--run-timeout", type=float, default=run_timeout, help="past it a run is 'hung'")
    p.add_argument("--work-dir", type=Path, default=work_dir)
    p.add_argument("--keep", action="store_true", help=keep_help)


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


def start_run(
    cfg: RunConfig, args: argparse.Namespace, repeat: int, job_spec: JobSpecFn
) -> tuple[Path, JobPlan]:
    """A fresh directory for one repeat and the job planned in it, profiled on the first
    repeat of a run that ``--profile`` names."""
    root = fresh_run_dir(args, cfg, repeat)
    spec = job_spec(cfg, args, args.device == "cuda", cfg.gpus)
    return root, workload_plan(spec, args, root, profile=repeat == 0 and cfg.name in args.profile)


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


def arg_fields(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The values of the arguments ``names`` (attribute names), for a record."""
    return {name: getattr(args, name) for name in names}


def bench_parser(
    doc: str | None, default_runs: list[str], *, scale_help: str, epochs: int
) -> argparse.ArgumentParser:
    """The parser of such a bench: ``add_run_args``, ``--scale`` of its generated graph and
    ``--epochs`` (the first is warm-up); ``parse_bench_args`` adds ``add_work_args``."""
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_args(p, default_runs)
    p.add_argument("--scale", type=float, default=1.0, help=scale_help)
    p.add_argument("--epochs", type=int, default=epochs, help="the first is warm-up")
    return p


def parse_bench_args(
    p: argparse.ArgumentParser,
    argv: list[str] | None,
    name: str,
    *,
    fanout: str,
    timeouts: tuple[float, float],
    keep_help: str,
) -> argparse.Namespace:
    """``add_work_args`` (the partition step's and a run's ``timeouts``, the work dir
    ``/tmp/distgnn-<name>-bench``), then the arguments parsed and checked
    (``check_run_args``; ``fanout``: an example)."""
    add_work_args(
        p,
        partition_timeout=timeouts[0],
        run_timeout=timeouts[1],
        work_dir=Path(f"/tmp/distgnn-{name}-bench"),
        keep_help=keep_help,
    )
    args = p.parse_args(argv)
    check_run_args(p, args, fanout)
    return args


def record_run(
    cfg: RunConfig,
    args: argparse.Namespace,
    repeat: int,
    timeout: float,
    *,
    job_spec: JobSpecFn,
    fields: dict[str, Any],
    figures: Callable[[Path], dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One repeat of a configuration: its record (``fields``, the configuration, ``extra``,
    the run's status), with ``figures(run dir)`` when it finished. The run directory goes."""
    root, job = start_run(cfg, args, repeat, job_spec)
    record: dict[str, Any] = {**fields, **config_fields(cfg, repeat), **(extra or {})}
    if run_job(job, root, args, record, timeout=timeout):
        record.update(figures(root))
        shutil.rmtree(root, ignore_errors=True)
    return record


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
    run_one: RunOneFn,
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


def run_bench(
    args: argparse.Namespace,
    *,
    env: Callable[[argparse.Namespace, list[RunConfig]], dict[str, Any]],
    data_bench: str,
    run_bench: str,
    job_spec: JobSpecFn,
    run_one: RunOneFn,
    describe: Callable[[Path, int], dict[str, Any]] | None = None,
    with_stores: Callable[[dict[int, Path]], None] | None = None,
) -> int:
    """The whole call: the environment record (``env`` of the configurations), the stores,
    ``with_stores`` on them, every run within the budget, the summary. 2 when the device has
    too few GPUs for a run."""
    started = time.perf_counter()
    start_preload(args)
    configs = run_configs(args)
    if configs is None:
        return 2
    emit(args.out, env(args, configs))
    args.work_dir.mkdir(parents=True, exist_ok=True)
    stores = build_stores(args, configs, bench=data_bench, job_spec=job_spec, describe=describe)
    if with_stores is not None:
        with_stores(stores)
    records = run_all(
        args, configs, started=started, bench=run_bench, job_spec=job_spec, run_one=run_one
    )
    finish(args, records)
    return 0
