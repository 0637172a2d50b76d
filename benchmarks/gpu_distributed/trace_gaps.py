"""Where a profiled trainer's GPU sat idle, and what its host threads did meanwhile.

Reads a chrome trace that ``torch.profiler`` wrote (``trace-trainer-0.json.gz``, as
``DISTGNN_PROFILE_DIR`` makes; see :mod:`distgnn_workload.trainer.profiler`) and prints one
JSON object:

- ``span_ms``: first to last GPU activity; ``busy_ms``: the union of the intervals in which
  any kernel, copy or memset ran on any stream; ``idle_ms`` the rest, and ``steps`` /
  ``*_per_step`` where ``--steps`` is given;
- ``gaps``: the GPU's idle intervals of at least ``--min-gap-us``, by count and summed;
- ``idle_by_host_op``: for each host operator or CUDA runtime call, the idle GPU time during
  which it ran (per thread: a call nested in another counts for both), largest first;
- ``kernels``: the GPU time per kernel name, largest first;
- ``threads``: per host thread, the time of its operators and CUDA runtime calls by name,
  largest first (a call nested in another counts for both): where the loader, the
  exchange's thread and the training thread spend a step.

    python benchmarks/gpu_distributed/trace_gaps.py trace-worker-2-bf16.json.gz --steps 20
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function")


def load(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap(a: tuple[float, float], gaps: list[tuple[float, float]], first: int) -> float:
    """Time of ``a`` inside the sorted ``gaps``, scanning from index ``first``."""
    total = 0.0
    for start, end in gaps[first:]:
        if start >= a[1]:
            break
        total += max(0.0, min(end, a[1]) - max(start, a[0]))
    return total


def summarise(
    events: list[dict[str, Any]], *, steps: int | None, min_gap_us: float, top: int
) -> dict[str, Any]:
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    if not gpu:
        raise SystemExit("no GPU activity in the trace (was it recorded with CUDA activity?)")
    busy = union([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu])
    span = (busy[0][0], busy[-1][1])
    gaps = [
        (busy[i][1], busy[i + 1][0])
        for i in range(len(busy) - 1)
        if busy[i + 1][0] - busy[i][1] >= min_gap_us
    ]
    busy_us = sum(end - start for start, end in busy)
    idle_us = (span[1] - span[0]) - busy_us
    starts = [g[0] for g in gaps]
    idle_by_op: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") not in HOST_CATEGORIES:
            continue
        a = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        if a[1] <= span[0] or a[0] >= span[1]:
            continue
        lo, hi = 0, len(starts)
        while lo < hi:  # the first gap that may overlap: the last starting before a[0]
            mid = (lo + hi) // 2
            if starts[mid] < a[0]:
                lo = mid + 1
            else:
                hi = mid
        spent = overlap(a, gaps, max(lo - 1, 0))
        if spent > 0:
            idle_by_op[f"{e.get('cat')}: {e.get('name')}"] += spent
    kernels: dict[str, float] = defaultdict(float)
    for e in gpu:
        kernels[str(e.get("name"))[:90]] += float(e["dur"])
    per = steps or 1
    threads: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for e in events:
        if e.get("cat") in HOST_CATEGORIES:
            threads[str(e.get("tid"))][f"{e.get('cat')}: {e.get('name')}"] += float(e["dur"])
    out: dict[str, Any] = {
        "span_ms": round((span[1] - span[0]) / 1e3, 3),
        "busy_ms": round(busy_us / 1e3, 3),
        "idle_ms": round(idle_us / 1e3, 3),
        "gaps": {
            "min_us": min_gap_us,
            "count": len(gaps),
            "ms": round(sum(b - a for a, b in gaps) / 1e3, 3),
        },
        "idle_by_host_op": [
            [name, round(us / 1e3 / per, 3)]
            for name, us in sorted(idle_by_op.items(), key=lambda kv: -kv[1])[:top]
        ],
        "kernels": [
            [name, round(us / 1e3 / per, 3)]
            for name, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:top]
        ],
        "threads": {
            tid: [
                [name, round(us / 1e3 / per, 3)]
                for name, us in sorted(ops.items(), key=lambda kv: -kv[1])[:top]
            ]
            for tid, ops in threads.items()
        },
    }
    if steps:
        out["steps"] = steps
        for key in ("span_ms", "busy_ms", "idle_ms"):
            out[key.replace("_ms", "_ms_per_step")] = round(out[key] / steps, 3)
        out["gaps"]["ms_per_step"] = round(out["gaps"]["ms"] / steps, 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--steps", type=int, default=None, help="steps the trace holds (per-step)")
    p.add_argument("--min-gap-us", type=float, default=20.0)
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    found = summarise(load(args.trace), steps=args.steps, min_gap_us=args.min_gap_us, top=args.top)
    text = json.dumps(found, indent=1)
    if args.out is not None:
        args.out.write_text(text + "\n")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
