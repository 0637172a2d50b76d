"""A real Prometheus (Debian's package) on loopback for the tests, and promtool.

Targets come from a file_sd file that the tests rewrite as processes start and stop; the
scrape configurations relabel the ``__meta_kubernetes_*`` labels of those targets the way
the Prometheus Operator relabels a PodMonitor's or ServiceMonitor's (see monitors.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distgnn_operator.local.ports import LOOPBACK, free_ports
from tests.support.process_group import stop_group

SCRAPE_INTERVAL_S = 1
# Grafana's $__rate_interval: max($__interval + scrape interval, 4 x scrape interval).
RATE_INTERVAL = f"{4 * SCRAPE_INTERVAL_S}s"


def tool(name: str) -> str:
    """The path of prometheus or promtool; the error says how to install them."""
    found = shutil.which(name)
    if found is None:
        raise AssertionError(
            f"{name} is not on PATH: install Debian's prometheus package "
            "(scripts/test.sh does: apt-get install --no-install-recommends prometheus)"
        )
    return found


def promtool(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args], input=input, capture_output=True, text=True, timeout=120
    )


@dataclass
class Prometheus:
    """One Prometheus process; its HTTP API as small helpers."""

    url: str
    work: Path
    process: subprocess.Popen[bytes]

    @property
    def targets_file(self) -> Path:
        return self.work / "targets.json"

    def set_targets(self, groups: Sequence[Mapping[str, Any]]) -> None:
        """Replace the file_sd target groups (Prometheus re-reads the file on change)."""
        tmp = self.targets_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(list(groups)))
        tmp.replace(self.targets_file)

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        result: list[dict[str, Any]] = self.api("query", **params)["result"]
        return result

    def query_range(
        self, expr: str, start: float, end: float, step: float = 1.0
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api(
            "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=str(step)
        )["result"]
        return result

    def label_values(self, label: str, match: str, start: float, end: float) -> set[str]:
        series = self.api("series", **{"match[]": match}, start=f"{start:.3f}", end=f"{end:.3f}")
        return {s[label] for s in series if label in s}

    def active_targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return targets

    def log(self) -> str:
        return (self.work / "prometheus.log").read_text(errors="replace")


def write_config(work: Path, scrape_configs: list[dict[str, Any]], rule_files: list[Path]) -> Path:
    """prometheus.yml: the scrape configurations, each reading the one file_sd file."""
    for config in scrape_configs:
        config["file_sd_configs"] = [{"files": [str(work / "targets.json")]}]
        config.setdefault("scrape_interval", f"{SCRAPE_INTERVAL_S}s")
        config.setdefault("scrape_timeout", f"{SCRAPE_INTERVAL_S}s")
    doc = {
        "global": {
            "scrape_interval": f"{SCRAPE_INTERVAL_S}s",
            "evaluation_interval": f"{SCRAPE_INTERVAL_S}s",
        },
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": scrape_configs,
    }
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@contextmanager
def run_prometheus(
    work: Path,
    scrape_configs: list[dict[str, Any]],
    rule_files: list[Path] = (),  # type: ignore[assignment]
) -> Iterator[Prometheus]:
    """Prometheus on a free loopback port, ready, stopped afterwards."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "targets.json").write_text("[]")
    config = write_config(work, scrape_configs, list(rule_files))
    check = promtool("check", "config", str(config))
    assert check.returncode == 0, f"promtool check config:\n{check.stdout}{check.stderr}"
    (port,) = free_ports(1)
    log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            tool("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address={LOOPBACK}:{port}",
            "--storage.tsdb.retention.time=1d",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    prom = Prometheus(f"http://{LOOPBACK}:{port}", work, process)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"prometheus exited:\n{prom.log()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, f"prometheus not ready:\n{prom.log()[-3000:]}"
            time.sleep(0.2)
        yield prom
    finally:
        stop_group(process)
        log.close()
