"""The Grafana dashboard queries only what the code exports, and shows the key throughput figures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import distgnn_operator.metrics
import distgnn_workload.metrics
from tests.chart.exported_metrics import Series, exported_series
from tests.chart.promql import label_names, metric_names, variable_query_metrics
from tests.chart.values_doc import CHART_DIR

DASHBOARD_DIR = CHART_DIR / "files" / "dashboards"
TRAINING = DASHBOARD_DIR / "distgnn-training.json"

# Labels that Prometheus attaches to every scraped series: the PodMonitor sets job (from the
# DistGNNJob-name pod label), namespace, pod, container, endpoint and role.
TARGET_LABELS = frozenset({"job", "namespace", "pod", "container", "endpoint", "instance", "role"})


def load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert isinstance(data, dict)
    return data


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL) of every panel target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            if "expr" in target:
                yield panel["title"], target["expr"]


@pytest.fixture(scope="module")
def exported() -> dict[str, Series]:
    return exported_series(distgnn_workload.metrics, distgnn_operator.metrics)


@pytest.fixture(scope="module")
def training() -> dict[str, Any]:
    return load(TRAINING)


def test_exported_names_follow_prometheus_suffix_rules(exported: dict[str, Series]) -> None:
    # Guards the reader itself: counters expose _total, histograms _bucket/_sum/_count.
    assert exported["distgnn_trainer_seeds_total"].type == "counter"
    assert "distgnn_trainer_seeds" not in exported
    assert {"distgnn_trainer_step_seconds_bucket", "distgnn_trainer_step_seconds_sum"} <= set(
        exported
    )
    assert "distgnn_trainer_step_seconds" not in exported
    assert exported["distgnn_trainer_loss"].type == "gauge"
    assert "le" in exported["distgnn_operator_reconcile_seconds_bucket"].labels


@pytest.mark.parametrize("path", sorted(DASHBOARD_DIR.glob("*.json")), ids=lambda p: p.name)
def test_every_queried_metric_is_exported(path: Path, exported: dict[str, Series]) -> None:
    dashboard = load(path)
    used: dict[str, set[str]] = {}
    for title, expr in exprs(dashboard):
        names = metric_names(expr)
        assert names, f"{path.name}: panel {title!r} queries no metric: {expr}"
        for name in names:
            used.setdefault(name, set()).add(f"panel {title!r}")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            for name in variable_query_metrics(query):
                used.setdefault(name, set()).add(f"variable {var['name']!r}")
    unknown = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert not unknown, (
        f"{path.name} queries series that no metric object in distgnn_workload.metrics or "
        f"distgnn_operator.metrics exports (check the name and its _total/_bucket/_sum suffix): "
        f"{unknown}"
    )


@pytest.mark.parametrize("path", sorted(DASHBOARD_DIR.glob("*.json")), ids=lambda p: p.name)
def test_every_label_is_a_metric_or_target_label(path: Path, exported: dict[str, Series]) -> None:
    for title, expr in exprs(load(path)):
        allowed = set(TARGET_LABELS)
        for name in metric_names(expr):
            allowed |= exported[name].labels if name in exported else set()
        unknown = label_names(expr) - allowed
        assert not unknown, (
            f"panel {title!r} uses labels {sorted(unknown)} that its metrics lack: {expr}"
        )


def test_key_throughput_metrics_have_panels(training: dict[str, Any]) -> None:
    by_title: dict[str, set[str]] = {}
    for title, expr in exprs(training):
        by_title.setdefault(title, set()).update(metric_names(expr))
    needed = {
        "distgnn_trainer_seeds_total": "seeds/s",
        "distgnn_trainer_sampled_edges_total": "sampled edges/s",
        "distgnn_trainer_step_seconds_bucket": "step latency",
        "distgnn_trainer_data_wait_seconds_sum": "data-wait share",
        "distgnn_trainer_loss": "loss",
        "distgnn_trainer_accuracy": "accuracy",
        "distgnn_trainer_link_mrr": "link-prediction MRR",
        "distgnn_trainer_link_hits": "link-prediction Hits@K",
        "distgnn_sampler_requests_total": "sampler requests",
        "distgnn_sampler_request_seconds_bucket": "sampler latency",
        "distgnn_sampler_cache_hit_ratio": "cache hit ratio",
        "distgnn_sampler_typed_feature_cache_hit_ratio": "typed samplers' hit ratio per node type",
        "distgnn_trainer_typed_feature_cache_hit_ratio": "typed trainers' hit ratio per node type",
        "distgnn_partition_step_seconds": "partition duration",
        "distgnn_operator_jobs": "jobs by phase",
        "distgnn_operator_reconcile_seconds_bucket": "reconcile latency",
    }
    for metric, what in needed.items():
        titles = [t for t, names in by_title.items() if metric in names]
        assert titles, f"no panel shows {what} ({metric})"
    # Seeds/s both per trainer (by rank) and in total.
    seeds = [e for _, e in exprs(training) if "distgnn_trainer_seeds_total" in metric_names(e)]
    assert any("rank" in label_names(e) for e in seeds), "no per-trainer seeds/s series"
    assert any("rank" not in label_names(e) for e in seeds), "no total seeds/s series"
    # Step latency p50 and p99.
    step = [
        e for _, e in exprs(training) if "distgnn_trainer_step_seconds_bucket" in metric_names(e)
    ]
    assert any("histogram_quantile(0.5," in e for e in step)
    assert any("histogram_quantile(0.99," in e for e in step)
    # Data-wait share is a ratio of the two histograms' sums.
    assert any(
        {"distgnn_trainer_data_wait_seconds_sum", "distgnn_trainer_step_seconds_sum"}
        <= metric_names(e)
        for _, e in exprs(training)
    )


def test_every_series_per_node_type_has_a_panel(
    training: dict[str, Any], exported: dict[str, Series]
) -> None:
    typed = {
        name
        for name, series in exported.items()
        if "node_type" in series.labels and not name.endswith("_created")
    }
    assert "distgnn_sampler_typed_feature_lookups_total" in typed  # guards the filter
    shown = set().union(*(metric_names(e) for _, e in exprs(training)))
    assert not typed - shown, f"series per node type without a panel: {sorted(typed - shown)}"
    # and those panels break the series down by node type
    for title, expr in exprs(training):
        if metric_names(expr) & typed:
            assert "node_type" in label_names(expr), f"panel {title!r} sums node types: {expr}"


def test_templating_by_namespace_and_job(training: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in training["templating"]["list"]}
    assert {"datasource", "namespace", "job"} <= set(variables)
    assert variables["datasource"]["type"] == "datasource"
    for title, expr in exprs(training):
        names = metric_names(expr)
        workload = any(
            n.startswith(("distgnn_trainer_", "distgnn_sampler_", "distgnn_partition_"))
            for n in names
        )
        if workload:
            assert '$namespace"' in expr, f"panel {title!r} ignores the namespace variable: {expr}"
            assert '$job"' in expr, f"panel {title!r} ignores the job variable: {expr}"
    for panel in panels(training):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_identity(training: dict[str, Any]) -> None:
    assert training["title"] == "DistGNN training"
    assert training["uid"] == "distgnn-training"
    ids = [p["id"] for p in panels(training)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
