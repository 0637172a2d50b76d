"""Runs the operator in process (kopf's KopfRunner) against the test control plane, and the
helpers the operator's integration tests share: applying jobs, waiting, reading children."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kopf.testing import KopfRunner

from distgnn_api.contract import CONFIG_FILE_NAME, PROGRESS_PATH, JobConfig
from distgnn_api.spec import GROUP, PLURAL, VERSION, Progress
from distgnn_operator import crd, naming
from distgnn_operator.constants import LABEL_JOB
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    DISTGNNJOB,
    EVENT,
    POD,
    STATEFULSET,
    Kind,
    RestKubeApi,
)
from tests.support.controlplane import ControlPlane
from tests.support.controlplane_cluster import EXIT_CODE_ANNOTATION, TEST_STORAGE_CLASS
from tests.terminal import report as report  # the integration tests import it from here

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# Read by distgnn_operator.handlers at import: a fast timer for tests.
OPERATOR_ENV = {
    "DISTGNN_OPERATOR_METRICS_PORT": "0",
    "DISTGNN_OPERATOR_HEALTH_PORT": "0",
    "DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL": "1",
    "DISTGNN_OPERATOR_PROGRESS_TIMEOUT": "0.5",
    # Jobs labelled kueue.x-k8s.io/queue-name are queued in Kueue (tests/integration/test_kueue_*).
    "DISTGNN_OPERATOR_KUEUE": "true",
}


def install_crd(plane: ControlPlane) -> None:
    """Apply the generated CRD and wait until it is served."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / crd.CRD_PATH))
    # Polled, not `kubectl wait`: that fails at once on a CRD whose status has no conditions
    # yet ("<nil> is of the type <nil>"), which a fresh API server can still show.
    established = '{.status.conditions[?(@.type=="Established")].status}'
    wait_for(
        f"the CRD {crd.CRD_NAME} to be established",
        lambda: (
            plane.kubectl(
                "get", f"crd/{crd.CRD_NAME}", "-o", f"jsonpath={established}", check=False
            ).stdout.strip()
            == "True"
        ),
    )
    wait_for_watch_cache(plane, f"/apis/{GROUP}/{VERSION}/{PLURAL}")


def wait_for_watch_cache(plane: ControlPlane, path: str) -> None:
    """Wait until the API server's watch cache of a new resource is initialised.

    Right after a CRD is established, list and watch requests served from the cache answer
    429 "storage is (re)initializing"; an operator that starts then may lose its first
    watches to retries and back-off. A list at resourceVersion 0 is served from the cache.
    """
    wait_for(
        f"the watch cache of {path}",
        lambda: (
            plane.kubectl(
                "get", "--raw", f"{path}?resourceVersion=0&limit=1", check=False
            ).returncode
            == 0
        ),
    )


@contextlib.contextmanager
def operator_env(plane: ControlPlane, kubeconfig: Path | None = None) -> Iterator[None]:
    """The operator's settings and the kubeconfig it logs in with (admin by default)."""
    config = str(kubeconfig or plane.kubeconfig)
    env = {**OPERATOR_ENV, "KUBECONFIG": config, "DISTGNN_OPERATOR_KUBECONFIG": config}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def run_operator(
    plane: ControlPlane, namespace: str, *extra: str, kubeconfig: Path | None = None
) -> Iterator[KopfRunner]:
    """The operator serving one namespace, standalone unless extra args say otherwise."""
    with operator_env(plane, kubeconfig):
        import distgnn_operator.handlers  # noqa: F401 - registers the handlers

        args = ["run", "--namespace", namespace, "-m", "distgnn_operator.handlers", "--verbose"]
        args += list(extra) if extra else ["--standalone"]
        with KopfRunner(args, timeout=60) as runner:
            yield runner
    assert runner.exit_code == 0, runner.output[-3000:]
    assert runner.exception is None


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 60.0, every: float = 0.25
) -> T:
    """Poll until probe returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


class Cluster:
    """Reads and writes of one test namespace, as plain JSON."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.ns = namespace
        self.api = RestKubeApi(plane.api_client())

    def apply(self, manifest: dict[str, Any]) -> None:
        self.plane.kubectl("apply", "-n", self.ns, "-f", "-", input=json.dumps(manifest))

    def job(self, name: str) -> dict[str, Any] | None:
        return self.api.get(DISTGNNJOB, self.ns, name)

    def status(self, name: str) -> dict[str, Any]:
        job = self.job(name)
        return (job or {}).get("status") or {}

    def phase(self, name: str) -> str | None:
        return self.status(name).get("phase")

    def wait_phase(self, name: str, phase: str, timeout: float = 60.0) -> dict[str, Any]:
        wait_for(f"{name} in phase {phase}", lambda: self.phase(name) == phase, timeout)
        return self.status(name)

    def condition(self, name: str, type_: str) -> dict[str, Any] | None:
        return next(
            (c for c in self.status(name).get("conditions", []) if c["type"] == type_), None
        )

    def get(self, kind: Kind, name: str) -> dict[str, Any] | None:
        return self.api.get(kind, self.ns, name)

    def job_config_json(self, job: str) -> str:
        """The job config the operator wrote for the pods, as its ConfigMap holds it."""
        config_map = self.get(CONFIG_MAP, naming.config_map_name(job))
        assert config_map is not None, f"no ConfigMap {naming.config_map_name(job)}"
        return str(config_map["data"][CONFIG_FILE_NAME])

    def job_config(self, job: str) -> JobConfig:
        return JobConfig.model_validate_json(self.job_config_json(job))

    def replicas(self, statefulset: str) -> int | None:
        """spec.replicas of a StatefulSet, or None when it does not exist."""
        sts = self.get(STATEFULSET, statefulset)
        return None if sts is None else int(sts["spec"]["replicas"])

    def wait_replicas(self, statefulset: str, replicas: int) -> None:
        wait_for(
            f"StatefulSet {statefulset} at {replicas} replicas",
            lambda: self.replicas(statefulset) == replicas,
        )

    def wait_get(self, kind: Kind, name: str) -> dict[str, Any]:
        return wait_for(f"{kind.kind} {name}", lambda: self.get(kind, name))

    def owned(self, kind: Kind, job: str) -> list[dict[str, Any]]:
        return self.api.list(kind, self.ns, {LABEL_JOB: job})

    def pods(self, job: str, role: str | None = None) -> list[dict[str, Any]]:
        pods = self.owned(POD, job)
        if role is not None:
            pods = [p for p in pods if p["metadata"]["labels"].get("distgnn.io/role") == role]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def running_pods(self, job: str, role: str, count: int) -> list[dict[str, Any]]:
        """Wait for `count` live, Ready pods of a role."""

        def probe() -> list[dict[str, Any]] | None:
            pods = [
                p
                for p in self.pods(job, role)
                if not p["metadata"].get("deletionTimestamp")
                and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", [])
                )
            ]
            return pods if len(pods) == count else None

        return wait_for(f"{count} Ready {role} pods of {job}", probe)

    def exit_pods(self, pods: list[dict[str, Any]], code: int) -> None:
        """Simulate the containers of these pods exiting with a code (kwok)."""
        names = [p["metadata"]["name"] for p in pods]
        self.plane.kubectl(
            "annotate",
            "pod",
            "-n",
            self.ns,
            *names,
            f"{EXIT_CODE_ANNOTATION}={code}",
            "--overwrite",
        )

    def finish_partition_pod(self, job: str, message: str) -> None:
        """Play the kubelet: the succeeded partition container's termination message (the
        figures a real partition process leaves there)."""
        selector = {"batch.kubernetes.io/job-name": f"{job}-partition"}

        def succeeded() -> dict[str, Any] | None:
            pods = self.api.list(POD, self.ns, selector)
            done = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
            return done[0] if done else None

        pod = wait_for(f"the succeeded partition pod of {job}", succeeded)
        statuses = pod["status"]["containerStatuses"]
        for status in statuses:
            status["state"]["terminated"]["message"] = message
        self.plane.kubectl(
            "patch", "pod", "-n", self.ns, pod["metadata"]["name"], "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"containerStatuses": statuses}}),
        )  # fmt: skip

    def events(self, name: str) -> list[dict[str, Any]]:
        items = self.api.list(EVENT, self.ns, {})
        return [
            e
            for e in items
            if e.get("involvedObject", {}).get("name") == name
            and e["involvedObject"].get("kind") == "DistGNNJob"
        ]

    def event_reasons(self, name: str) -> set[str]:
        return {e["reason"] for e in self.events(name)}

    def create_bound_claim(self, claim: str, size: str = "10Gi") -> None:
        """A claim bound to a fresh hostPath volume (there is no provisioner)."""
        self.plane.create_pv(f"{self.ns}-{claim}", size=size, claim=(self.ns, claim))
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": TEST_STORAGE_CLASS,
                    "resources": {"requests": {"storage": size}},
                },
            }
        )

    def volume_for_created_claim(self, job: str, size: str = "10Gi") -> None:
        """A volume reserved for the claim <job>-data that the operator will create."""
        self.plane.create_pv(f"{self.ns}-{job}-data", size=size, claim=(self.ns, f"{job}-data"))


def job_manifest(name: str, **spec: Any) -> dict[str, Any]:
    """A small DistGNNJob; keyword arguments set top-level spec fields (camelCase)."""
    body: dict[str, Any] = {
        "dataset": {"synthetic": {"numNodes": 2000, "numEdges": 8000}},
        "storage": {"storageClassName": TEST_STORAGE_CLASS, "size": "10Gi"},
    }
    body.update(spec)
    return {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": name},
        "spec": body,
    }


def lifecycle_manifest(name: str, port: int, samplers: int, **spec: Any) -> dict[str, Any]:
    """A job of two GPU trainers over two METIS partitions, ten epochs of 512 seeds, in worker
    mode (``samplers`` 0) or with that many CPU samplers, serving metrics on ``port``; keyword
    arguments set its further spec fields (camelCase): the dataset, the model, the task."""
    return job_manifest(
        name,
        samplers={"replicas": samplers, "gpusPerPod": 0},
        trainers={"replicas": 2, "gpusPerPod": 1},
        partition={"algorithm": "metis", "numPartitions": 2},
        training={"epochs": 10, "batchSize": 512},
        metricsPort=port,
        **spec,
    )


@contextlib.contextmanager
def progress_server(ip: str, port: int, progress: Progress) -> Iterator[list[str]]:
    """Serve /progress on a pod's (loopback) IP, as trainer 0's metrics server does; yields
    the paths requested."""
    requests: list[str] = []
    body = progress.model_dump_json(by_alias=True).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            if self.path != PROGRESS_PATH:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer((ip, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield requests
    finally:
        server.shutdown()
        server.server_close()


def container_of(obj: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def env_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container_of(obj)["env"]}


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False)
