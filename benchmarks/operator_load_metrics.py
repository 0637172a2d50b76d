"""The operator's figures the load benchmark reads from its /metrics: the reconcile histogram
(quantiles interpolated as Prometheus' histogram_quantile does) and the reconciler's API
requests by verb and resource."""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

HISTOGRAM = "distgnn_operator_reconcile_seconds"
REQUESTS = "distgnn_operator_api_requests_total"


@dataclass(frozen=True)
class Scrape:
    """The operator's reconcile histogram and request counters at one moment."""

    buckets: tuple[tuple[float, float], ...]
    """Cumulative (upper bound, count)."""
    count: float
    total: float
    requests: dict[tuple[str, str], float]
    """(verb, resource) -> requests sent by the reconciler (empty before the counter existed)."""

    def __sub__(self, before: Scrape) -> Scrape:
        earlier = dict(before.buckets)
        return Scrape(
            buckets=tuple((b, c - earlier.get(b, 0.0)) for b, c in self.buckets),
            count=self.count - before.count,
            total=self.total - before.total,
            requests={
                k: v - before.requests.get(k, 0.0)
                for k, v in self.requests.items()
                if v - before.requests.get(k, 0.0) > 0
            },
        )


def _labels(line: str) -> dict[str, str]:
    inner = line.split("{", 1)[1].rsplit("}", 1)[0]
    return {k: v.strip('"') for k, _, v in (p.partition("=") for p in inner.split(",") if p)}


def scrape(port: int) -> Scrape:
    """Read the reconcile histogram and the request counters from /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    buckets: list[tuple[float, float]] = []
    requests: dict[tuple[str, str], float] = {}
    count = total = 0.0
    for line in text.splitlines():
        value = line.rsplit(" ", 1)[-1]
        if line.startswith(f"{HISTOGRAM}_bucket"):
            le = _labels(line)["le"]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(value)))
        elif line.startswith(f"{HISTOGRAM}_count"):
            count = float(value)
        elif line.startswith(f"{HISTOGRAM}_sum"):
            total = float(value)
        elif line.startswith(f"{REQUESTS}{{"):
            labels = _labels(line)
            requests[(labels["verb"], labels["resource"])] = float(value)
    return Scrape(tuple(sorted(buckets)), count, total, requests)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q."""
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if bound == float("inf"):
                return lower_bound
            width = cumulative - lower_count
            return lower_bound + (bound - lower_bound) * (
                (rank - lower_count) / width if width else 0.0
            )
        lower_bound, lower_count = bound, cumulative
    return lower_bound


def per_reconcile(requests: dict[tuple[str, str], float], reconciles: float) -> dict[str, Any]:
    """Requests per reconcile by verb, and by verb and resource."""
    if not reconciles or not requests:
        return {}
    by_verb: dict[str, float] = {}
    for (verb, _), n in requests.items():
        by_verb[verb] = by_verb.get(verb, 0.0) + n
    return {
        "total": round(sum(by_verb.values()) / reconciles, 2),
        "by_verb": {v: round(n / reconciles, 2) for v, n in sorted(by_verb.items())},
        "by_verb_and_resource": {
            f"{v} {r}": round(n / reconciles, 3) for (v, r), n in sorted(requests.items())
        },
    }
