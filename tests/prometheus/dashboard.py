"""The Grafana dashboard's queries, with Grafana's variables substituted, for a real Prometheus."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.chart.test_dashboard import TRAINING, panels
from tests.prometheus.server import RATE_INTERVAL


@dataclass(frozen=True)
class Query:
    """One target of one panel."""

    panel_id: int
    title: str
    ref: str
    expr: str
    legend: str

    @property
    def name(self) -> str:
        return f"{self.title} [{self.ref}]"


def load() -> dict[str, Any]:
    data = json.loads(TRAINING.read_text())
    assert isinstance(data, dict)
    return data


def queries(dashboard: dict[str, Any]) -> Iterator[Query]:
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            if "expr" in target:
                yield Query(
                    panel["id"],
                    panel["title"],
                    target["refId"],
                    target["expr"],
                    target.get("legendFormat", ""),
                )


def variable_queries(dashboard: dict[str, Any]) -> dict[str, str]:
    """Each query variable's query (label_values(...))."""
    out = {}
    for var in dashboard["templating"]["list"]:
        if var.get("type") == "query":
            q = var["query"]
            out[var["name"]] = q["query"] if isinstance(q, dict) else q
    return out


def substitute(expr: str, *, namespace: str = ".*", job: str = ".*") -> str:
    """The expression as Grafana sends it: variables replaced by their (regex) values."""
    values = {"namespace": namespace, "job": job, "__rate_interval": RATE_INTERVAL}

    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"unknown dashboard variable ${name} in {expr}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.*),\s*(?P<label>\w+)\)$")


def label_values_query(query: str) -> tuple[str, str]:
    """(selector, label) of a label_values(selector, label) variable query."""
    match = _LABEL_VALUES.match(query.strip())
    assert match, f"not a label_values(selector, label) query: {query}"
    return match["selector"], match["label"]
