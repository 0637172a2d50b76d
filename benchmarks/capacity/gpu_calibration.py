"""Calibration of the capacity plan on the GPU machine: the products-scale job of
``runtime_calibration.py`` on 1 or 2 GPUs, in worker and in server-client mode.

One trainer per GPU (and one sampler per GPU, on it, in server mode), bf16, 1 epoch,
3-layer GraphSAGE, hidden 256, fanout 15/10/5, batch 1024, full-neighbourhood evaluation
after training; a random partition into 2 (the store is written once and reused by both
modes). While each run lasts it samples every workload process's host RSS (VmHWM, and VmRSS
over time), its GPU memory (``nvidia-smi``: the CUDA context and the caching allocator's
reserve, what the card must hold for it) and its counters (``/metrics``); then it prints the
model's figures (``distgnn plan --json --meta`` on the store's META.json) beside the
measured ones and appends one JSON line per run to ``OUT/gpu-calibration.jsonl``.

Where the GPU memory went (``cuda_phases.py``): each trainer's caching allocator by phase
(setup, first steps with the CUDA graph capture, training, evaluation) from the run's
``training_stats.json``, each GPU sampler's (setup, shutdown) from its log, kept in the
record's ``cuda_memory`` and printed per process, with its ``nvidia-smi`` peak minus its
allocator's reserved peak: the memory outside the allocator (CUDA context, NCCL, RPC).

On the device machine (one command, under 8 minutes)::

    OUT=<dir> bash benchmarks/capacity/device_calibration.sh

On CPU, as a smoke test at a small scale (2 trainers, gloo)::

    python benchmarks/capacity/gpu_calibration.py --gpus 0 --scale 0.002 --out-dir /tmp/cal

Recorded runs against the model as it is now (no GPU needed)::

    python benchmarks/capacity/gpu_calibration.py \
        --measured benchmarks/capacity/results/gpu-h200-1.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_phases import phase_lines
from runtime_calibration import compare, run


def visible_gpus() -> int:
    """GPUs ``nvidia-smi -L`` lists (0 without it)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


TOLERANCE = 0.2
"""The model is calibrated where it is within 20% of the measurement."""


def summary_lines(r: dict[str, Any]) -> list[str]:
    """One line per figure: measured, model, error, and whether it is within TOLERANCE."""
    out = []
    for kind, rows in r["comparison"].items():
        for key, v in rows.items():
            err = v.get("error")
            model = v.get("model", float("nan"))
            verdict = "" if err is None else ("ok" if abs(err) <= TOLERANCE else "OUT")
            out.append(
                f"{r['mode']:7} {kind:10} {key:40} measured {v['measured']:>16,.1f} "
                f"model {model:>16,.1f} error {'' if err is None else f'{err:+.0%}'} {verdict}"
            )
    return out


def recompare(path: Path) -> list[str]:
    """Every run recorded in ``path`` (a gpu-calibration.jsonl) against the current model."""
    lines = []
    for raw in path.read_text().splitlines():
        if raw.strip():
            r = json.loads(raw)
            r["comparison"] = compare(r)
            lines += summary_lines(r) + phase_lines(r)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="share of products (1: products)")
    ap.add_argument("--gpus", type=int, help="GPUs to use (default: up to 2 of those visible)")
    ap.add_argument("--modes", nargs="+", default=["worker", "server"])
    ap.add_argument("--run-timeout", type=float, default=240.0, help="seconds per run")
    ap.add_argument("--out-dir", type=Path, default=Path(os.environ.get("OUT", "results/run")))
    ap.add_argument("--work-dir", type=Path, help="default: a temporary directory")
    ap.add_argument("--measured", type=Path, help="recompare the runs of a recorded jsonl")
    args = ap.parse_args()
    if args.measured is not None:
        print("\n".join(recompare(args.measured)))
        return
    gpus = min(2, visible_gpus()) if args.gpus is None else args.gpus
    batch = max(1, round(1024 * args.scale))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / "gpu-calibration.jsonl"
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="capacity-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{gpus} GPU(s), products x {args.scale:g}, batch {batch}, work dir {work}", flush=True)
    started = time.monotonic()
    try:
        for mode in args.modes:
            r = run(
                args.scale,
                mode,
                batch,
                work,
                gpus=gpus,
                algorithm="random",
                timeout=args.run_timeout,
            )
            r["gpus"] = gpus
            r["comparison"] = compare(r)
            print(f"{mode}: {r['wall_s']:.0f} s", flush=True)
            print("\n".join(summary_lines(r) + phase_lines(r)), flush=True)
            with out.open("a") as f:
                f.write(json.dumps(r) + "\n")
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"total {time.monotonic() - started:.0f} s; wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
