"""Every panel of the Grafana dashboard against a real Prometheus scraping real processes.

A Prometheus (Debian's package) on loopback scrapes, under the chart's PodMonitor and
ServiceMonitor relabelling: a ``distgnn run`` job in worker mode and one in server-client
mode (CPU, gloo), and the operator running against the real control plane, where a job
partitions and a second one reuses that partition. Then every dashboard expression is
evaluated with its variables substituted, every endpoint's exposition goes through
``promtool check metrics``, and the chart's alert rules load and evaluate without error.
Each panel's last value is written to ``panels.json`` beside the test's Prometheus data
(the path is printed).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api import contract as c
from distgnn_api.spec import parse_job
from distgnn_operator.builders import JobContext, build_statefulset
from distgnn_operator.local.ports import LOOPBACK, free_ports
from distgnn_operator.local.runner import LOCAL_NAMESPACE
from distgnn_operator.reconcile.kube_api import POD, PVC
from tests.chart.helm import Helm
from tests.local.process_table import processes_with_env
from tests.operator.harness import Cluster, install_crd, job_manifest, wait_for
from tests.prometheus import dashboard as dash
from tests.prometheus.monitors import (
    endpoint_target,
    pod_monitor_scrape_config,
    pod_target,
    service_monitor_scrape_config,
)
from tests.prometheus.server import Prometheus, promtool, run_prometheus
from tests.support.controlplane import ControlPlane

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(900)]

RELEASE, RELEASE_NS = "dg", "distgnn-system"
WORKER_JOB, SERVER_JOB = "tier-worker", "tier-server"
RUN_TIMEOUT_S = 300

# Panels (by id) that only one mode fills; the rest must have data for every job.
SERVER_CLIENT_ONLY = {13, 14}  # sampler requests/s and latency
PARTITION_PANELS = {18, 19, 26}  # exported by the operator, for the jobs it runs
OPERATOR_PANELS = {21, 22, 23, 27, 28}
# Targets that are rightly empty in a healthy run (their panel has another target with data).
MAY_BE_EMPTY = {(23, "B"): "reconcile errors: none in a healthy run"}


def _job_doc(name: str, samplers: int) -> dict[str, Any]:
    """A small job that trains long enough (tens of seconds) for 1 s scrapes to see it."""
    return {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": name},
        "spec": {
            "dataset": {
                "synthetic": {
                    "numNodes": 6000,
                    "numEdges": 60000,
                    "numFeatures": 16,
                    "numClasses": 4,
                    "trainFraction": 0.5,
                    "valFraction": 0.1,
                }
            },
            "partition": {"numPartitions": 2},
            "samplers": {"replicas": samplers, "cacheRatio": 0.2, "workers": 1},
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "model": {"hiddenChannels": 32, "numLayers": 2, "fanout": [10, 5]},
            "training": {"epochs": 8, "batchSize": 64},
        },
    }


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "distgnn"
    return [str(script)] if script.exists() else [sys.executable, "-m", "distgnn_operator.cli"]


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return str(resp.read().decode())
    except OSError:
        return None


@dataclass
class Scrapes:
    """The targets Prometheus is given, and the last exposition of each endpoint."""

    prom: Prometheus
    operator: dict[str, Any] | None = None
    service_labels: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[tuple[str, c.Role], dict[str, str]] = field(default_factory=dict)
    expositions: dict[str, str] = field(default_factory=dict)

    def local_targets(self, uids: dict[str, str]) -> list[dict[str, Any]]:
        """A pod target per live sampler or trainer process of the local runs (from /proc)."""
        groups = []
        for job, uid in uids.items():
            for pid in processes_with_env(c.ENV_JOB_UID, uid):
                try:
                    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                env = dict(x.decode().split("=", 1) for x in raw if b"=" in x)
                role = c.Role(env[c.ENV_ROLE])
                if role is c.Role.partitioner or c.ENV_METRICS_PORT not in env:
                    continue
                rank = int(env[c.ENV_RANK])
                address = f"{env.get(c.ENV_METRICS_ADDRESS) or LOOPBACK}:{env[c.ENV_METRICS_PORT]}"
                groups.append(
                    pod_target(
                        address,
                        namespace=env[c.ENV_NAMESPACE],
                        pod=c.pod_name(job, role, rank),
                        container=role.value,
                        labels=self.pod_labels[(job, role)],
                    )
                )
        return groups

    def refresh(self, uids: dict[str, str]) -> None:
        groups = self.local_targets(uids)
        if self.operator is not None:
            groups.append(self.operator)
        self.prom.set_targets(groups)
        for group in groups:
            address = group["targets"][0]
            labels = group["labels"]
            name = f"{labels['__meta_kubernetes_namespace']}/{labels['__meta_kubernetes_pod_name']}"
            body = _get(f"http://{address}/metrics")
            if body is not None:
                self.expositions[name] = body


@pytest.fixture(scope="module")
def chart(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    helm = Helm(control_plane.bin_dir / "helm", tmp_path_factory.mktemp("helm"))
    values = {
        "metrics.podMonitor.enabled": True,
        "metrics.serviceMonitor.enabled": True,
        "metrics.prometheusRule.enabled": True,
    }
    return [d for d in yaml.safe_load_all(helm.template(RELEASE, RELEASE_NS, values)) if d]


def _of_kind(docs: list[Any], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    assert isinstance(found, dict)
    return found


@pytest.fixture(scope="module")
def prom(chart: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    rules = work / "rules.yaml"
    rules.write_text(yaml.safe_dump(_of_kind(chart, "PrometheusRule")["spec"]))
    configs = [
        pod_monitor_scrape_config(_of_kind(chart, "PodMonitor")),
        service_monitor_scrape_config(_of_kind(chart, "ServiceMonitor")),
    ]
    with run_prometheus(work, configs, [rules]) as server:
        yield server


@dataclass
class TierRun:
    """What the module's runs left: the time window, the jobs and the scraped text."""

    start: float
    end: float
    scrapes: Scrapes
    operator_namespace: str
    local_results: dict[str, c.Result]
    report: Path


def _run_local(
    scrapes: Scrapes, work: Path, name: str, samplers: int, uids: dict[str, str]
) -> c.Result:
    doc = _job_doc(name, samplers)
    job_file = work / f"{name}.yaml"
    job_file.write_text(yaml.safe_dump(doc))
    job = parse_job(doc)
    uid = str(uuid.uuid4())
    for role in (c.Role.sampler, c.Role.trainer):
        if role is c.Role.sampler and samplers == 0:
            continue
        ctx = JobContext(name=name, namespace=LOCAL_NAMESPACE, uid=uid, spec=job.spec)
        scrapes.pod_labels[(name, role)] = build_statefulset(ctx, role)["spec"]["template"][
            "metadata"
        ]["labels"]
    run_dir = work / "runs" / name
    log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    argv = [*_cli(), "run", str(job_file), "--data-dir", str(work / "data"), "--uid", uid]
    proc = subprocess.Popen(
        [*argv, "--run-dir", str(run_dir), "--gpus", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    uids[name] = uid
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while proc.poll() is None:
            assert time.monotonic() < deadline, f"{name} ran past {RUN_TIMEOUT_S}s"
            scrapes.refresh(uids)
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()
        del uids[name]
        scrapes.refresh(uids)
    output = (work / f"{name}.log").read_text(errors="replace")
    assert proc.returncode == 0, f"distgnn run {name} exited {proc.returncode}:\n{output[-4000:]}"
    return c.Result.model_validate_json((run_dir / c.RESULT_FILE).read_text())


def _start_operator(plane: ControlPlane, namespace: str, work: Path) -> tuple[Any, int]:
    """``python -m distgnn_operator`` (the Deployment's command) serving one namespace."""
    metrics_port, health_port = free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    env.update(
        {
            "KUBECONFIG": str(plane.kubeconfig),
            "DISTGNN_OPERATOR_KUBECONFIG": str(plane.kubeconfig),
            "DISTGNN_OPERATOR_NAMESPACES": namespace,
            "DISTGNN_OPERATOR_METRICS_PORT": str(metrics_port),
            "DISTGNN_OPERATOR_HEALTH_PORT": str(health_port),
            "DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL": "1",
        }
    )
    log = open(work / "operator.log", "wb")  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen(
        [sys.executable, "-m", "distgnn_operator"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc, metrics_port


def _stop(proc: Any) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _finish_partition_pod(cluster: Cluster, job: str, message: str) -> None:
    """Play the kubelet: the succeeded partition container's termination message."""
    selector = {"batch.kubernetes.io/job-name": f"{job}-partition"}

    def succeeded() -> dict[str, Any] | None:
        pods = cluster.api.list(POD, cluster.ns, selector)
        done = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
        return done[0] if done else None

    pod = wait_for(f"the succeeded partition pod of {job}", succeeded)
    statuses = pod["status"]["containerStatuses"]
    for status in statuses:
        status["state"]["terminated"]["message"] = message
    cluster.plane.kubectl(
        "patch", "pod", "-n", cluster.ns, pod["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"containerStatuses": statuses}}),
    )  # fmt: skip


def _run_operator_jobs(
    control_plane: ControlPlane, namespace: str, scrapes: Scrapes, work: Path, figures: str
) -> None:
    """A job partitions (its pod's termination message holds the worker run's real figures),
    a second one reuses the partition; the operator is scraped throughout."""
    install_crd(control_plane)
    cluster = Cluster(control_plane, namespace)
    cluster.create_bound_claim("shared")
    proc, port = _start_operator(control_plane, namespace, work)
    service = f"{RELEASE}-distgnn-metrics"
    scrapes.operator = endpoint_target(
        f"{LOOPBACK}:{port}",
        namespace=RELEASE_NS,
        service=service,
        service_labels=scrapes.service_labels,
        pod=f"{RELEASE}-distgnn-0",
        container="operator",
    )
    try:
        scrapes.refresh({})
        storage = {"claimName": "shared"}
        cluster.apply(job_manifest("first", storage=storage))
        _finish_partition_pod(cluster, "first", figures)
        cluster.wait_phase("first", "Training")
        wait_for(
            "the partition figures on the claim",
            lambda: any(
                k.startswith("partition-figures.distgnn.io/")
                for k in ((cluster.get(PVC, "shared") or {})["metadata"].get("annotations") or {})
            ),
        )
        cluster.apply(job_manifest("second", storage=storage, training={"epochs": 3}))
        second = cluster.wait_phase("second", "Training")
        assert second["partition"]["reused"] is True

        def scraped() -> bool:
            scrapes.refresh({})
            found = scrapes.prom.query(
                f'distgnn_partition_edge_cut{{job="second", namespace="{namespace}"}}'
            )
            return bool(found)

        wait_for("the reused job's edge cut in Prometheus", scraped, timeout=60, every=1)
        # A few more scrapes for the operator's rates.
        for _ in range(8):
            scrapes.refresh({})
            time.sleep(1)
    finally:
        _stop(proc)
        scrapes.operator = None
        scrapes.refresh({})


@pytest.fixture(scope="module")
def tier(
    prom: Prometheus,
    chart: list[Any],
    control_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> TierRun:
    work = tmp_path_factory.mktemp("tier")
    scrapes = Scrapes(prom)
    service = _of_kind(chart, "Service")
    scrapes.service_labels = service["metadata"]["labels"]
    start = time.time()
    uids: dict[str, str] = {}
    results = {
        WORKER_JOB: _run_local(scrapes, work, WORKER_JOB, 0, uids),
        SERVER_JOB: _run_local(scrapes, work, SERVER_JOB, 2, uids),
    }
    figures_file = work / "runs" / WORKER_JOB / "logs" / "partition-0.termination"
    assert figures_file.exists(), "the local partition step left no termination message"
    namespace = control_plane.create_namespace("prometheus-tier")
    try:
        _run_operator_jobs(control_plane, namespace, scrapes, work, figures_file.read_text())
    finally:
        control_plane.delete_namespace(namespace)
    end = time.time()
    return TierRun(start, end, scrapes, namespace, results, prom.work / "panels.json")


# --------------------------------------------------------------------------- the checks


def _values(prom: Prometheus, expr: str, tier: TierRun) -> dict[str, float]:
    """The last non-NaN value of each series of a range query over the whole tier."""
    out: dict[str, float] = {}
    for series in prom.query_range(expr, tier.start, tier.end):
        name = json.dumps(series["metric"], sort_keys=True)
        numbers = [float(v) for _, v in series["values"] if not math.isnan(float(v))]
        if numbers:
            out[name] = numbers[-1]
    return out


def test_every_panel_has_data(prom: Prometheus, tier: TierRun) -> None:
    report: dict[str, dict[str, float]] = {}
    empty = []
    for q in dash.queries(dash.load()):
        values = _values(prom, dash.substitute(q.expr), tier)
        report[q.name] = values
        if not values and (q.panel_id, q.ref) not in MAY_BE_EMPTY:
            empty.append(f"{q.name}: {q.expr}")
    tier.report.write_text(json.dumps(report, indent=2))
    print(f"\npanel values (last value of each series): {tier.report}")
    for name, values in report.items():
        shown = ", ".join(f"{_legend(k)}={v:.4g}" for k, v in sorted(values.items())[:6])
        print(f"  {name}: {shown or '(empty)'}")
    assert not empty, "panels empty over the whole tier:\n" + "\n".join(empty)


def _legend(metric_json: str) -> str:
    metric = json.loads(metric_json)
    return ",".join(f"{k}={v}" for k, v in sorted(metric.items())) or "{}"


def test_panels_per_mode(prom: Prometheus, tier: TierRun) -> None:
    """Per job: the sampler panels are empty only in worker mode; every other workload panel
    has data for both local jobs; the partition panels for the operator's jobs, reused too."""
    problems = []
    for q in dash.queries(dash.load()):
        if q.panel_id in OPERATOR_PANELS:
            continue
        for job, namespace in (
            (WORKER_JOB, LOCAL_NAMESPACE),
            (SERVER_JOB, LOCAL_NAMESPACE),
            ("first", tier.operator_namespace),
            ("second", tier.operator_namespace),
        ):
            operator_job = job in ("first", "second")
            if (q.panel_id in PARTITION_PANELS) != operator_job:
                continue
            expr = dash.substitute(q.expr, namespace=namespace, job=job)
            has = bool(_values(prom, expr, tier))
            if q.panel_id in SERVER_CLIENT_ONLY:
                want = job == SERVER_JOB
            elif q.panel_id == 15 and q.ref == "A":
                want = job == SERVER_JOB  # the samplers' cache
            elif q.panel_id == 15 and q.ref == "B":
                want = job == WORKER_JOB  # the trainers' cache
            elif q.panel_id == 16 and q.ref == "A":
                want = job == SERVER_JOB  # bytes the samplers sent
            else:
                want = True
            if has != want:
                problems.append(f"{q.name} for {job}: {'data' if has else 'empty'}")
    assert not problems, "\n".join(problems)


def test_variables_list_the_jobs(prom: Prometheus, tier: TierRun) -> None:
    queries = dash.variable_queries(dash.load())
    selector, label = dash.label_values_query(queries["namespace"])
    assert LOCAL_NAMESPACE in prom.label_values(label, selector, tier.start, tier.end)
    selector, label = dash.label_values_query(
        dash.substitute(queries["job"], namespace=LOCAL_NAMESPACE)
    )
    assert {WORKER_JOB, SERVER_JOB} <= prom.label_values(label, selector, tier.start, tier.end)


def test_no_false_zeros(prom: Prometheus, tier: TierRun) -> None:
    def series(expr: str) -> list[dict[str, Any]]:
        return prom.query_range(expr, tier.start, tier.end)

    # No process exports the series of a role it does not play.
    assert not series('{__name__=~"distgnn_partition_.*", role!=""}')
    assert not series('{__name__=~"distgnn_sampler_.*", role="trainer"}')
    assert not series('{__name__=~"distgnn_trainer_.*", role="sampler"}')
    # Loss and accuracy appear with their first value, never as an unmeasured 0.
    assert not series("distgnn_trainer_loss == 0")
    assert not series("distgnn_trainer_accuracy == 0")
    assert not series("distgnn_sampler_cache_hit_ratio == 0 and distgnn_sampler_cache_hit_ratio")
    # The test accuracy is set by the final evaluation, just before the trainer exits: a
    # scrape may miss it, but it never exists from the trainer's start.
    for job in (WORKER_JOB, SERVER_JOB):
        for rank in ("0", "1"):
            sel = f'job="{job}", rank="{rank}"'
            seeds = series(f"distgnn_trainer_seeds_total{{{sel}}}")
            assert seeds, f"{job} rank {rank}: no seeds series"
            first_seed = float(seeds[0]["values"][0][0])
            for split in ("val", "test"):
                acc = series(f'distgnn_trainer_accuracy{{{sel}, split="{split}"}}')
                if split == "val":
                    assert acc, f"{job} rank {rank}: no validation accuracy"
                if acc:
                    first = float(acc[0]["values"][0][0])
                    assert first > first_seed, (
                        f"{job} rank {rank}: the {split} accuracy appeared at the trainer's start"
                    )
    # The server-client trainers never look up a feature cache: no 0/0 series of theirs.
    assert not series(f'distgnn_trainer_feature_cache_lookups_total{{job="{SERVER_JOB}"}}')


def test_every_endpoint_passes_promtool(tier: TierRun) -> None:
    expositions = tier.scrapes.expositions
    roles = {name.split("/")[1].rsplit("-", 1)[0] for name in expositions}
    assert {f"{WORKER_JOB}-trainer", f"{SERVER_JOB}-sampler", f"{RELEASE}-distgnn"} <= roles, roles
    failures = []
    for name, text in sorted(expositions.items()):
        result = promtool("check", "metrics", input=text)
        if result.returncode != 0:
            failures.append(f"{name}: {result.stdout}{result.stderr}")
    assert not failures, "\n".join(failures)


def test_alert_rules_evaluate(prom: Prometheus, tier: TierRun) -> None:
    groups = prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == {
        "DistGNNJobStuckInPhase",
        "DistGNNThroughputCollapsed",
        "DistGNNGangRestarts",
        "DistGNNTrainerWaitingOnData",
        "DistGNNOperatorDown",
    }
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad


def _series_of(prom: Prometheus, selector: str, tier: TierRun) -> dict[str, Any]:
    """The first series matching: its labels and its raw samples over the tier."""
    found = prom.query_range(selector, tier.start, tier.end)
    assert found, f"no series {selector}"
    series = found[0]
    return {
        "labels": series["metric"],
        "values": [[float(t), float(v)] for t, v in series["values"]],
    }


def _per_second(samples: list[list[float]]) -> float:
    (t0, v0), (t1, v1) = samples[0], samples[-1]
    return (v1 - v0) / (t1 - t0)


def test_real_series_for_the_alert_fixtures(prom: Prometheus, tier: TierRun) -> None:
    """The label sets and rates the alert-rule tests replay (tests/prometheus/fixtures/);
    DISTGNN_RECORD_ALERT_SERIES=<file> writes them there."""
    seeds = _series_of(prom, f'distgnn_trainer_seeds_total{{job="{WORKER_JOB}", rank="0"}}', tier)
    wait = _series_of(
        prom, f'distgnn_trainer_data_wait_seconds_sum{{job="{SERVER_JOB}", rank="0"}}', tier
    )
    step = _series_of(
        prom, f'distgnn_trainer_step_seconds_sum{{job="{SERVER_JOB}", rank="0"}}', tier
    )
    restarts = _series_of(prom, 'distgnn_operator_job_restarts{job="first"}', tier)
    phase = _series_of(prom, 'distgnn_operator_job_phase_start_time_seconds{job="second"}', tier)
    up = _series_of(prom, f'up{{job="{RELEASE}-distgnn-metrics"}}', tier)
    real = {
        "seeds": {"labels": seeds["labels"], "per_second": _per_second(seeds["values"])},
        "data_wait": {"labels": wait["labels"], "per_second": _per_second(wait["values"])},
        "step": {"labels": step["labels"], "per_second": _per_second(step["values"])},
        "restarts": {"labels": restarts["labels"], "value": restarts["values"][-1][1]},
        "phase_start": {"labels": phase["labels"]},
        "operator_up": {"labels": up["labels"], "value": max(v for _, v in up["values"])},
    }
    assert real["seeds"]["per_second"] > 0
    assert 0 < real["step"]["per_second"] <= 1.5  # a rank's step time per second of wall time
    assert real["operator_up"]["value"] == 1
    target = os.environ.get("DISTGNN_RECORD_ALERT_SERIES")
    if target:
        Path(target).write_text(json.dumps(real, indent=2, sort_keys=True) + "\n")
