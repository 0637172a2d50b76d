"""The slow reconciles of a load run, from the operator's log: with
``DISTGNN_OPERATOR_SLOW_RECONCILE_SECONDS`` set, the operator logs each reconcile over it
with the API requests it sent (``distgnn_operator.reconcile.call_trace``). This sums them:
how many, how much of their time the requests explain, and which request was the longest
in each (or none, when the reconcile spent most of its time in no request: waiting for a
CPU, the interpreter's lock or a writer thread)."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

LINE = re.compile(
    r"slow reconcile (?P<job>\S+): (?P<seconds>[\d.]+)s, (?P<api>[\d.]+)s in requests, "
    r"(?P<none>[\d.]+)s in none; (?P<count>\d+) requests: (?P<calls>.*)$"
)
CALL = re.compile(
    r"(?P<verb>\w+) (?P<resource>[^/ ]+)/(?P<name>\S*) at \+(?P<start>[\d.]+) "
    r"for (?P<seconds>[\d.]+)s \[(?P<thread>[^\]]*)\]"
)


def parse(line: str) -> dict[str, Any] | None:
    """One slow reconcile's line: its seconds, those in requests and in none, its requests."""
    found = LINE.search(line)
    if found is None:
        return None
    calls = [
        (m["verb"], m["resource"], float(m["start"]), float(m["seconds"]), m["thread"])
        for m in CALL.finditer(found["calls"])
    ]
    return {
        "job": found["job"],
        "seconds": float(found["seconds"]),
        "api": float(found["api"]),
        "none": float(found["none"]),
        "calls": calls,
    }


def longest(reconcile: dict[str, Any]) -> str:
    """What a slow reconcile waited on most: its longest request ("verb resource"), or
    "no request" when the time in none was longer than that request."""
    calls = reconcile["calls"]
    top = max(calls, key=lambda c: c[3]) if calls else None
    if top is None or reconcile["none"] > top[3]:
        return "no request"
    return f"{top[0]} {top[1]}"


def summarize(log: Path, threshold: float) -> dict[str, Any]:
    """The slow reconciles of an operator log."""
    found = [r for r in map(parse, log.read_text(errors="replace").splitlines()) if r]
    if not found:
        return {"threshold_seconds": threshold, "count": 0}
    total = sum(r["seconds"] for r in found)
    return {
        "threshold_seconds": threshold,
        "count": len(found),
        "seconds": round(total, 2),
        "share_in_requests": round(sum(r["api"] for r in found) / total, 3),
        "share_in_none": round(sum(r["none"] for r in found) / total, 3),
        "requests_median": statistics.median(len(r["calls"]) for r in found),
        "longest_request_seconds_median": round(
            statistics.median(max((c[3] for c in r["calls"]), default=0.0) for r in found), 3
        ),
        "waited_most_on": dict(Counter(map(longest, found)).most_common()),
    }
