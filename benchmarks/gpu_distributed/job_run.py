"""One benchmark run of a job's workload processes: started through the supervisor of
``distgnn run``, waited for up to a timeout (every process's stacks when it hangs), the GPUs
watched meanwhile; and the figures of a finished run from ``training_stats.json`` and
``result.json``. Shared by ``bench.py`` here and ``benchmarks/gpu_hetero/bench.py``.

With ``--preload`` (:func:`preload_cpu_processes`), the CPU processes of every run of the
script are forked from one zygote that imported torch and PyG once (``distgnn run
--preload``'s launcher); a GPU process still starts as a fresh interpreter."""

from __future__ import annotations

import atexit
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_monitor import GpuMonitor, stacks

from distgnn_api import contract as c
from distgnn_operator.local.launch_plan import ProcessSpec
from distgnn_operator.local.supervisor import Supervisor
from distgnn_operator.local.zygote import Zygote

STATS_FILE = "training_stats.json"

_ZYGOTE: list[Zygote] = []


def preload_cpu_processes() -> None:
    """Fork the CPU processes of every later run from one zygote (stopped at exit)."""
    if not _ZYGOTE:
        _ZYGOTE.append(Zygote())
        atexit.register(_ZYGOTE[0].close)


def _supervisor() -> Supervisor:
    return Supervisor(grace_period_s=5, zygote=_ZYGOTE[0] if _ZYGOTE else None)


@dataclass
class ProcessRun:
    """How the processes ended: ``status`` is ok, failed (one exited non-zero) or hung."""

    status: str
    wall_s: float
    codes: dict[str, int | None]
    stuck: dict[str, str] = field(default_factory=dict)
    """Stacks of the processes still running at the timeout."""
    gpu: dict[str, Any] = field(default_factory=dict)
    """The GPU monitor's summary (utilisation, contexts per process)."""


def run_processes(workload: Sequence[ProcessSpec], *, cuda: bool, timeout: float) -> ProcessRun:
    """Start every process, wait until all exit 0, one fails, or ``timeout`` passes."""
    names = [s.name for s in workload]
    logs = {s.name: s.log_path for s in workload}
    t0 = time.perf_counter()
    monitor = GpuMonitor().start() if cuda else None
    sup = _supervisor()
    status = "hung"
    stuck: dict[str, str] = {}
    try:
        for spec in workload:
            sup.start(spec)
        status = wait_for(sup, names, t0 + timeout - time.perf_counter())
        if status == "hung":
            stuck = stacks(sup, [n for n in names if sup.poll(n) is None], logs)
    finally:
        if monitor is not None:
            monitor.stop()
        pids = {sup.pid(name): name for name in names}
        sup.stop(names)
    return ProcessRun(
        status=status,
        wall_s=round(time.perf_counter() - t0, 1),
        codes={name: sup.poll(name) for name in names},
        stuck=stuck,
        gpu=monitor.summary(pids) if monitor is not None else {},
    )


def wait_for(sup: Supervisor, names: Sequence[str], timeout: float) -> str:
    """'ok', 'failed' (a process exited non-zero) or 'hung' (still running at the timeout)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        codes = [sup.poll(name) for name in names]
        if any(code not in (None, 0) for code in codes):
            return "failed"
        if all(code == 0 for code in codes):
            return "ok"
        time.sleep(0.2)
    return "hung"


def run_side_by_side(steps: Sequence[Sequence[ProcessSpec]], timeout: float) -> str:
    """Run several jobs' process lists at once (e.g. the partition steps of stores built side
    by side), one supervisor each, as their processes share names; 'ok', or the first
    other status of :func:`wait_for` within ``timeout`` seconds for all of them."""
    t0 = time.perf_counter()
    sups = [_supervisor() for _ in steps]
    status = "ok"
    try:
        for sup, processes in zip(sups, steps, strict=True):
            for spec in processes:
                sup.start(spec)
        for sup, processes in zip(sups, steps, strict=True):
            left = timeout - (time.perf_counter() - t0)
            status = wait_for(sup, [spec.name for spec in processes], max(left, 0.0))
            if status != "ok":
                break
    finally:
        for sup, processes in zip(sups, steps, strict=True):
            sup.stop([spec.name for spec in processes])
    return status


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` of a process's log, warnings left out."""
    text = path.read_text(errors="replace").splitlines() if path.exists() else []
    keep = [t for t in text if "Warning" not in t and "warn(" not in t][-lines:]
    return "\n".join(keep)


def _cuda_peaks(stats: dict[str, Any]) -> dict[str, int]:
    """The largest of the trainers' allocator peaks over the run (bytes; none off CUDA): what
    tensors held, and what the caching allocator reserved from the card."""
    ranks = [r["overall"] for r in (stats.get("cuda_memory") or {}).values() if "overall" in r]
    if not ranks:
        return {}
    return {
        "cuda_allocated_peak": max(r["allocated_peak"] for r in ranks),
        "cuda_reserved_peak": max(r["reserved_peak"] for r in ranks),
    }


def epoch_figures(run_dir: Path, gpus: int) -> dict[str, Any]:
    """A finished run's figures (the first epoch is warm-up when there are more)."""
    stats = json.loads((run_dir / STATS_FILE).read_text())
    epochs = stats["epochs"]
    measured = epochs[1:] if len(epochs) > 1 else epochs
    seconds = sum(e["seconds"] for e in measured)
    seeds = sum(e["seeds"] for e in measured)
    edges = sum(e["edges"] for e in measured)
    result = json.loads((run_dir / c.RESULT_FILE).read_text())
    return {
        "epochs_measured": len(measured),
        "epoch_s": round(seconds / len(measured), 3),
        "seeds_per_s": round(seeds / seconds, 1),
        "seeds_per_s_per_gpu": round(seeds / seconds / gpus, 1),
        "sampled_edges_per_s": round(edges / seconds, 1),
        "sampled_edges_per_seed": round(edges / max(seeds, 1), 3),
        "data_wait_share": round(sum(e["data_wait_seconds"] for e in measured) / seconds, 4),
        "host_wait_share": round(sum(e["host_wait_seconds"] for e in measured) / seconds, 4),
        "warmup_epoch_s": round(epochs[0]["seconds"], 3) if len(epochs) > 1 else None,
        "fastest_rank_share": round(
            sum(e.get("fastest_rank_seconds") or e["seconds"] for e in measured) / seconds, 4
        ),
        # remote feature rows (and the ids sent for them) a rank pulled per step
        "feature_bytes_per_step": round(
            sum(e.get("feature_bytes", 0) for e in measured)
            / max(sum(e["steps"] for e in measured), 1)
        ),
        # steps (all ranks) that ran eagerly: a batch over the fixed shapes' caps or blocks
        "eager_steps": sum(e.get("eager_steps", 0) for e in measured),
        "final_loss": round(epochs[-1]["loss"], 4),
        **_cuda_peaks(stats),
        "val_accuracy": result.get("valAccuracy"),
        "test_accuracy": round(result["testAccuracy"], 4),
        "test_accuracy_kind": result.get("testAccuracyKind"),
    }
