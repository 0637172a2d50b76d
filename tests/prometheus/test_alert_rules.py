"""The chart's PrometheusRule under ``promtool``: its templates check, and every alert fires on a
fault and stays quiet on the healthy series it is built from.

The series replay a real run (tests/prometheus/fixtures/real_series.json, recorded by the
prometheus tier from a real Prometheus scraping ``distgnn run`` and the operator): the label
sets exactly as the chart's monitors produce them, the trainer's real seeds/s and step-time
rates. Each fault is the healthy series bent the way a failure bends it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helm import Helm
from tests.prometheus.server import promtool
from tests.support.controlplane_binaries import ensure_binaries

pytestmark = pytest.mark.prometheus

REAL = Path(__file__).parent / "fixtures" / "real_series.json"
RELEASE, RELEASE_NS = "dg", "distgnn-system"
ALERT_LABELS = {"severity": "warning"}


@pytest.fixture(scope="module")
def rule_group(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    helm = Helm(ensure_binaries() / "helm", tmp_path_factory.mktemp("helm"))
    docs = yaml.safe_load_all(
        helm.template(RELEASE, RELEASE_NS, {"metrics.prometheusRule.enabled": True})
    )
    (rule,) = [d for d in docs if d and d["kind"] == "PrometheusRule"]
    spec: dict[str, Any] = rule["spec"]
    return spec


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REAL.read_text())
    return data


def _selector(labels: dict[str, str]) -> str:
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _counter(labels: dict[str, str], phases: list[tuple[float, int]]) -> dict[str, str]:
    """A counter series at 1m steps: ``phases`` of (per-second rate, minutes)."""
    parts, value = [], 0.0
    for per_second, minutes in phases:
        step = per_second * 60
        parts.append(f"{value:.6g}+{step:.6g}x{minutes}")
        value += step * (minutes + 1)
    return {"series": _selector(labels), "values": " ".join(parts)}


def _alert(labels: dict[str, str]) -> dict[str, Any]:
    return {"exp_labels": {**labels, **ALERT_LABELS}}


def _quiet_then_fires(
    alertname: str, quiet_at: str, fires_at: str, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """``alertname`` has not fired at ``quiet_at`` and fires with ``labels`` at ``fires_at``."""
    return [
        {"alertname": alertname, "eval_time": quiet_at, "exp_alerts": []},
        {"alertname": alertname, "eval_time": fires_at, "exp_alerts": [_alert(labels)]},
    ]


def _job_labels(labels: dict[str, str]) -> dict[str, str]:
    return {"namespace": labels["namespace"], "job": labels["job"]}


def test_rule_templates_check(rule_group: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule_group))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_every_alert_fires_on_its_fault_only(
    rule_group: dict[str, Any], real: dict[str, Any], tmp_path: Path
) -> None:
    # Annotations are text for people (their templates are checked above); promtool would
    # compare their rendered values too, which says nothing about when a rule fires.
    rules = copy.deepcopy(rule_group)
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    rules_path = tmp_path / "rules.yaml"
    rules_path.write_text(yaml.safe_dump(rules))

    seeds = real["seeds"]
    rate = seeds["per_second"]
    wait, step = real["data_wait"], real["step"]
    step_rate = step["per_second"]
    restarts = real["restarts"]["labels"]
    phase = real["phase_start"]["labels"]
    up = real["operator_up"]["labels"]
    tests: list[dict[str, Any]] = [
        {
            "name": "throughput collapses to a tenth of the job's own rate",
            "interval": "1m",
            "input_series": [_counter(seeds["labels"], [(rate, 40), (rate / 10, 30)])],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNThroughputCollapsed", "40m", "60m", _job_labels(seeds["labels"])
            ),
        },
        {
            "name": "a trainer waits on data 80% of its step time",
            "interval": "1m",
            "input_series": [
                _counter(step["labels"], [(step_rate, 50)]),
                _counter(wait["labels"], [(0.1 * step_rate, 20), (0.8 * step_rate, 30)]),
            ],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNTrainerWaitingOnData",
                "20m",
                "45m",
                {**_job_labels(wait["labels"]), "rank": wait["labels"]["rank"]},
            ),
        },
        {
            "name": "two gang restarts within the window",
            "interval": "1m",
            "input_series": [{"series": _selector(restarts), "values": "0x10 1x10 2x20"}],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNGangRestarts", "15m", "25m", _job_labels(restarts)
            ),
        },
        {
            "name": "a job stays Partitioning past the threshold; Training does not count",
            "interval": "1m",
            "input_series": [
                {"series": _selector(phase), "values": "0x40"},
                {"series": _selector({**phase, "phase": "Partitioning"}), "values": "0x40"},
            ],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNJobStuckInPhase",
                "29m",
                "31m",
                {**_job_labels(phase), "phase": "Partitioning"},
            ),
        },
        {
            "name": "the operator's target goes down",
            "interval": "1m",
            "input_series": [{"series": _selector(up), "values": "1x10 0x10"}],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNOperatorDown",
                "12m",
                "17m",
                {"job": up["job"], "namespace": up["namespace"]},
            ),
        },
        {
            "name": "the operator is not scraped at all",
            "interval": "1m",
            "input_series": [],
            "alert_rule_test": _quiet_then_fires(
                "DistGNNOperatorDown",
                "4m",
                "6m",
                {"job": f"{RELEASE}-distgnn-metrics", "namespace": RELEASE_NS},
            ),
        },
        {
            "name": "the real run's healthy series fire nothing",
            "interval": "1m",
            "input_series": [
                _counter(seeds["labels"], [(rate, 60)]),
                _counter(step["labels"], [(step_rate, 60)]),
                _counter(wait["labels"], [(0.1 * step_rate, 60)]),
                {"series": _selector(restarts), "values": "0x60"},
                {"series": _selector(phase), "values": "0x60"},
                {"series": _selector(up), "values": "1x60"},
            ],
            "alert_rule_test": [
                {"alertname": name, "eval_time": "60m", "exp_alerts": []}
                for name in (
                    "DistGNNThroughputCollapsed",
                    "DistGNNTrainerWaitingOnData",
                    "DistGNNGangRestarts",
                    "DistGNNJobStuckInPhase",
                    "DistGNNOperatorDown",
                )
            ],
        },
    ]
    test_path = tmp_path / "alerts_test.yaml"
    test_path.write_text(
        yaml.safe_dump(
            {"rule_files": [str(rules_path)], "evaluation_interval": "1m", "tests": tests},
            sort_keys=False,
        )
    )
    result = promtool("test", "rules", str(test_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") >= 1, result.stdout
