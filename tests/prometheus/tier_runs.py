"""The prometheus tier's runs: ``distgnn run`` of a homogeneous and a heterogeneous job in each
mode, and the operator against the real control plane, all scraped by one Prometheus under the chart's monitor relabelling.

``distgnn run --preload`` forks its CPU processes from a zygote; they are found through the
run's process table (``processes.json`` in the run directory: each live process's role, rank
and metrics port) and given to Prometheus as file_sd targets with the labels Kubernetes discovery would give
their pods, taken from the operator's own pod templates.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distgnn_api import contract as c
from distgnn_api.spec import parse_job
from distgnn_operator.builders import JobContext, build_statefulset
from distgnn_operator.local.job_plan import LOCAL_NAMESPACE
from distgnn_operator.local.ports import LOOPBACK, free_ports
from distgnn_operator.local.supervisor import read_process_table
from distgnn_operator.reconcile.kube_api import PVC
from tests.operator.harness import Cluster, install_crd, job_manifest, wait_for
from tests.prometheus.monitors import endpoint_target, pod_target
from tests.prometheus.server import Prometheus
from tests.support.controlplane import ControlPlane
from tests.support.process_group import stop_group
from tests.support.scrape import get_body

RELEASE, RELEASE_NS = "dg", "distgnn-system"
WORKER_JOB, SERVER_JOB = "tier-worker", "tier-server"
HETERO_JOB, HETERO_SERVER_JOB = "tier-hetero", "tier-hetero-server"
RUN_TIMEOUT_S = 300
QUICKSTART_HETERO = Path(__file__).parents[2] / "manifests" / "examples" / "quickstart-hetero.yaml"


def _job_doc(name: str, samplers: int) -> dict[str, Any]:
    """A small job that trains long enough (seconds, beside another job) for 1 s scrapes to
    see it."""
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
            # a feature budget below each holder's table (about 230 KB): its rows split
            # between the two tiers, so that the GPU-tier series have data on CPU too
            "samplers": {
                "replicas": samplers,
                "cacheRatio": 0.2,
                "workers": 1,
                "featureMemory": 100_000,
            },
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "model": {"hiddenChannels": 32, "numLayers": 2, "fanout": [10, 5]},
            # long enough to run past the targets' discovery for the 1 s scrapes' rate
            # windows: a worker-mode run (no sampler to wait on) once ended before a rate
            # had two points at 8 epochs, a server-client one once at 5
            "training": {"epochs": 10 if samplers else 16, "batchSize": 64},
        },
    }


def _hetero_doc(name: str, samplers: int) -> dict[str, Any]:
    """quickstart-hetero on a smaller MAG-shaped graph, long enough to scrape."""
    doc: dict[str, Any] = yaml.safe_load(QUICKSTART_HETERO.read_text())
    doc["metadata"]["name"] = name
    spec = doc["spec"]
    spec["samplers"] = {"replicas": samplers}
    spec["dataset"]["syntheticMag"].update({"scale": 0.005, "numClasses": 8})
    spec["training"].update({"epochs": 4, "batchSize": 128})
    return doc


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "distgnn"
    return [str(script)] if script.exists() else [sys.executable, "-m", "distgnn_operator.cli"]


@dataclass
class Scrapes:
    """The targets Prometheus is given, and the last exposition of each endpoint."""

    prom: Prometheus
    operator: dict[str, Any] | None = None
    service_labels: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[tuple[str, c.Role], dict[str, str]] = field(default_factory=dict)
    expositions: dict[str, str] = field(default_factory=dict)
    bind_addresses: set[str] = field(default_factory=set)

    def local_targets(self, runs: dict[str, Path]) -> list[dict[str, Any]]:
        """A pod target per live sampler or trainer process of the local runs (from each
        run's process table)."""
        groups = []
        for job, run_dir in runs.items():
            for entry in read_process_table(run_dir).values():  # empty until written
                env = entry.env
                if entry.exit_code is not None or c.ENV_METRICS_PORT not in env:
                    continue
                role = c.Role(env[c.ENV_ROLE])
                if role is c.Role.partitioner:
                    continue
                rank = int(env[c.ENV_RANK])
                self.bind_addresses.add(env.get(c.ENV_METRICS_ADDRESS, ""))
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

    def refresh(self, runs: dict[str, Path]) -> None:
        groups = self.local_targets(runs)
        if self.operator is not None:
            groups.append(self.operator)
        self.prom.set_targets(groups)
        for group in groups:
            address = group["targets"][0]
            labels = group["labels"]
            name = f"{labels['__meta_kubernetes_namespace']}/{labels['__meta_kubernetes_pod_name']}"
            body = get_body(f"http://{address}/metrics")
            if body is not None:
                self.expositions[name] = body


def of_kind(docs: list[Any], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    assert isinstance(found, dict)
    return found


@dataclass
class TierRun:
    """What the module's runs left: the time window, the jobs and the scraped text."""

    start: float
    end: float
    scrapes: Scrapes
    operator_namespace: str
    local_results: dict[str, c.Result]
    report: Path


@dataclass
class _LocalRun:
    """One ``distgnn run`` of the tier, started."""

    name: str
    proc: subprocess.Popen[bytes]
    run_dir: Path
    log: Path


def _start_local(scrapes: Scrapes, work: Path, name: str, doc: dict[str, Any]) -> _LocalRun:
    job_file = work / f"{name}.yaml"
    job_file.write_text(yaml.safe_dump(doc))
    job = parse_job(doc)
    uid = str(uuid.uuid4())
    for role in (c.Role.sampler, c.Role.trainer):
        if role is c.Role.sampler and job.spec.worker_mode:
            continue
        ctx = JobContext(name=name, namespace=LOCAL_NAMESPACE, uid=uid, spec=job.spec)
        scrapes.pod_labels[(name, role)] = build_statefulset(ctx, role)["spec"]["template"][
            "metadata"
        ]["labels"]
    run_dir = work / "runs" / name
    log = work / f"{name}.log"
    argv = [*_cli(), "run", str(job_file), "--data-dir", str(work / "data"), "--uid", uid]
    argv.append("--preload")
    with open(log, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [*argv, "--run-dir", str(run_dir), "--gpus", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return _LocalRun(name, proc, run_dir, log)


def run_local(scrapes: Scrapes, work: Path, docs: dict[str, dict[str, Any]]) -> dict[str, c.Result]:
    """``distgnn run`` of each job at the same time, scraped until all have ended; their
    results. (Jobs of one wave must not share a partition: each would write it.)"""
    started: list[_LocalRun] = []
    try:
        for name, doc in docs.items():
            started.append(_start_local(scrapes, work, name, doc))
        runs = {r.name: r.run_dir for r in started}
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while any(r.proc.poll() is None for r in started):
            assert time.monotonic() < deadline, f"{sorted(docs)} ran past {RUN_TIMEOUT_S}s"
            scrapes.refresh(runs)
            time.sleep(0.5)
    finally:
        for r in started:
            if r.proc.poll() is None:
                os.killpg(r.proc.pid, signal.SIGTERM)
                r.proc.wait(timeout=30)
        scrapes.refresh({})
    results = {}
    for r in started:
        output = r.log.read_text(errors="replace")
        assert r.proc.returncode == 0, (
            f"distgnn run {r.name} exited {r.proc.returncode}:\n{output[-4000:]}"
        )
        results[r.name] = c.Result.model_validate_json((r.run_dir / c.RESULT_FILE).read_text())
    return results


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


def run_operator_jobs(
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
        cluster.finish_partition_pod("first", figures)
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
        stop_group(proc)
        scrapes.operator = None
        scrapes.refresh({})


def run_tier(
    prom: Prometheus, chart: list[Any], control_plane: ControlPlane, work: Path
) -> TierRun:
    """The local runs, then the operator's jobs, all scraped by ``prom``."""
    scrapes = Scrapes(prom)
    service = of_kind(chart, "Service")
    scrapes.service_labels = service["metadata"]["labels"]
    start = time.time()
    # Two waves of two jobs, each wave's at the same time: the first partitions the two
    # graphs, the second reuses the partitions.
    results = run_local(
        scrapes,
        work,
        {WORKER_JOB: _job_doc(WORKER_JOB, 0), HETERO_JOB: _hetero_doc(HETERO_JOB, 0)},
    )
    results |= run_local(
        scrapes,
        work,
        {
            SERVER_JOB: _job_doc(SERVER_JOB, 2),
            HETERO_SERVER_JOB: _hetero_doc(HETERO_SERVER_JOB, 2),
        },
    )
    figures_file = work / "runs" / WORKER_JOB / "logs" / "partition-0.termination"
    assert figures_file.exists(), "the local partition step left no termination message"
    namespace = control_plane.create_namespace("prometheus-tier")
    try:
        run_operator_jobs(control_plane, namespace, scrapes, work, figures_file.read_text())
    finally:
        control_plane.delete_namespace(namespace)
    end = time.time()
    return TierRun(start, end, scrapes, namespace, results, prom.work / "panels.json")
