"""Where the operator's time goes under load, from py-spy's raw (collapsed) stacks of every
thread, idle ones included (``py-spy record --idle --format raw``).

Reconcile threads (stacks through ``_reconcile_timed``) are split by what they were in: API
requests (the wait for the server and the JSON both ways), the spec's parse, the capacity
plan, the status computation, the builders, /progress, the wait for the writes a reconcile
sends together, the rest. Those writes (the writers' pool), the Events' POSTs (their own
thread) and the FailedCreate Events' LISTs (their own thread) are counted apart, each split
into API requests and the rest. The event loop thread's
busy samples are kopf's own work (watch streams, per-object workers, handlers); its idle
samples (in ``select``) and the idle reconcile workers are counted apart. The reconciles'
API requests, the writers' included, are also split by the step of the reconcile that sent
them (the innermost of the steps below on the stack): reading the children, the status
write, the Events it records, the children's writes; the Events' thread and the
FailedCreate Events' thread are steps of their own.

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


API_STEPS: tuple[tuple[str, str], ...] = (
    ("job read", "reconcile_job ("),
    ("children read", "read_children"),
    ("status write", "write_status"),
    ("Events recorded", "/reconcile/events.py"),
    ("Kueue Workload", "/reconcile/kueue_gate.py"),
    ("children: create or adopt", "_ensure"),
    ("children: StatefulSet apply", "_apply_statefulset"),
    ("children: partition Job suspend or resume", "_set_job_suspended"),
    ("children: gang restart's pod deletes", "_delete_stale_pods"),
    ("claim: partition marker", "_mark_partition_complete"),
    ("claim: partition figures", "observe_figures"),
)


def api_step(stack: str) -> str:
    """The reconcile step that sent the API request of one sampled stack."""
    found, at = "other", -1
    for name, frame in API_STEPS:
        where = stack.rfind(frame)
        if where > at:
            found, at = name, where
    return found


WRITERS = ("reconcile/actions.py", "write_status")
"""Frames of the writes a reconcile sends together from the writers' pool."""
EVENTS = "EventQueue._run"
"""The thread that posts the reconciles' Events."""
FAILED_CREATES = "FailedCreates._run"
"""The thread that lists the FailedCreate Events."""
API = "RestKubeApi._call"


def category(stack: str) -> str:
    """The category of one sampled stack."""
    if RECONCILE in stack:
        if "Concurrently.__call__" in stack and API not in stack:
            return "reconcile: waiting for the writes sent together"
        for name, frames in RECONCILE_PARTS:
            if any(f in stack for f in frames):
                return f"reconcile: {name}"
        return "reconcile: other"
    if EVENTS in stack:
        return "events thread: api requests" if API in stack else "idle: events thread"
    if FAILED_CREATES in stack:
        return (
            "failed-creates thread: api requests" if API in stack else "idle: failed-creates thread"
        )
    if "_WorkItem.run" in stack and any(w in stack for w in WRITERS):
        return "writers: api requests" if API in stack else "writers: other"
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
    steps: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            kind = category(stack)
            seconds[kind] += int(count) / rate
            if kind in ("reconcile: api requests", "writers: api requests"):
                steps[api_step(stack)] += int(count) / rate
            elif kind == "events thread: api requests":
                steps["Events posted (their own thread)"] += int(count) / rate
            elif kind == "failed-creates thread: api requests":
                steps["FailedCreate Events list (its own thread)"] += int(count) / rate
    reconcile = sum(v for k, v in seconds.items() if k.startswith("reconcile:"))
    return {
        "seconds": {k: round(v, 2) for k, v in seconds.most_common()},
        "reconcile_shares": {
            k.removeprefix("reconcile: "): round(v / reconcile, 3)
            for k, v in seconds.most_common()
            if k.startswith("reconcile:") and reconcile
        },
        "api_requests_by_step": {k: round(v, 2) for k, v in steps.most_common()},
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
