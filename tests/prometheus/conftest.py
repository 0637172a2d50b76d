"""Fixtures of the prometheus tier: the rendered chart, a Prometheus configured from its
monitors and rules, and the runs it scrapes (once per module)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.chart.helm import Helm
from tests.prometheus.monitors import pod_monitor_scrape_config, service_monitor_scrape_config
from tests.prometheus.server import Prometheus, run_prometheus
from tests.prometheus.tier_runs import RELEASE, RELEASE_NS, TierRun, of_kind, run_tier
from tests.support.controlplane import ControlPlane


@pytest.fixture(scope="module")
def chart(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    helm = Helm(control_plane.bin_dir / "helm", tmp_path_factory.mktemp("helm"))
    values = {
        "metrics.podMonitor.enabled": True,
        "metrics.serviceMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
    }
    return [d for d in yaml.safe_load_all(helm.template(RELEASE, RELEASE_NS, values)) if d]


@pytest.fixture(scope="module")
def prom(chart: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump(of_kind(chart, "PrometheusRule")["spec"]))
    configs = [
        pod_monitor_scrape_config(of_kind(chart, "PodMonitor")),
        service_monitor_scrape_config(of_kind(chart, "ServiceMonitor")),
    ]
    with run_prometheus(work, configs, [rules]) as server:
        yield server


@pytest.fixture(scope="module")
def tier(
    prom: Prometheus,
    chart: list[Any],
    control_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> TierRun:
    return run_tier(prom, chart, control_plane, tmp_path_factory.mktemp("tier"))
