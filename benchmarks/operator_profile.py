"""Where the operator's time goes under load, from py-spy's raw (collapsed) stacks of every
thread, idle ones included (``py-spy record --idle --format raw``).

Reconcile threads (stacks through ``_reconcile_timed``) are split by what they were in: API
requests (the wait for the server and the JSON both ways), the spec's parse, the capacity
plan, the status computation, the builders, /progress, the rest. The event loop thread's
busy samples are kopf's own work (watch streams, per-object workers, handlers); its idle
samples (in ``select``) and the idle reconcile workers are counted apart.

Usage::

    python benchmarks/operator_profile.py operator.raw --rate 50
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

RECONCILE = "_reconcile_timed"
# (category, frames that put a reconcile sample in it), first match wins.
RECONCILE_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("progress", ("fetch_progress",)),
    ("api requests", ("RestKubeApi._call",)),
    ("spec parse", ("parse_spec",)),
    ("capacity plan", ("spec_shortfalls",)),
    ("status computation", ("compute_status",)),
    ("builders", ("operator/builders/",)),
)


def category(stack: str) -> str:
    """The category of one sampled stack."""
    if RECONCILE in stack:
        for name, frames in RECONCILE_PARTS:
            if any(f in stack for f in frames):
                return f"reconcile: {name}"
        return "reconcile: other"
    last = stack.rsplit(";", 1)[-1]
    if "_worker (concurrent/futures/thread.py" in stack or "(threading.py" in last:
        return "idle: reconcile workers and other threads"
    if "select (selectors.py" in last or "serve_forever" in stack:
        return "idle: event loop and metrics server"
    if "kopf" in stack or "asyncio" in stack:
        return "event loop busy (kopf, handlers)"
    return "other"


def summarize(path: Path, rate: float) -> dict[str, object]:
    """Seconds of samples by category, and each reconcile part's share of reconcile time."""
    seconds: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            seconds[category(stack)] += int(count) / rate
    reconcile = sum(v for k, v in seconds.items() if k.startswith("reconcile:"))
    return {
        "seconds": {k: round(v, 2) for k, v in seconds.most_common()},
        "reconcile_shares": {
            k.removeprefix("reconcile: "): round(v / reconcile, 3)
            for k, v in seconds.most_common()
            if k.startswith("reconcile:") and reconcile
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("raw", type=Path, help="py-spy record --format raw output")
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's samples per second")
    args = parser.parse_args()
    print(json.dumps(summarize(args.raw, args.rate), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
