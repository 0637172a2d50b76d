"""A real Kubernetes control plane on loopback for the integration tests.

It runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake
nodes, some with ``nvidia.com/gpu``) as child processes, each in its own process group
with its own log file, and tears them all down again. The binaries come from
``hack/build-controlplane.sh``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from tests.support.controlplane_binaries import missing_binaries
from tests.support.controlplane_cluster import (
    KWOK_NODE_ANNOTATION,
    KWOK_STAGES,
    NODE_IP,
    NODES,
    POD_CIDR,
    SERVICE_CIDR,
    TEST_STORAGE_CLASS,
    cluster_objects,
    node_schedulable,
)
from tests.support.controlplane_errors import ComponentError, ControlPlaneError, KubectlError
from tests.support.controlplane_pki import Pki, make_pki, write_admin_kubeconfig, write_kubeconfig
from tests.support.controlplane_processes import (
    Component,
    PortAllocator,
    http_get,
    insecure_context,
    launch,
    wait_ready,
)

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

T = TypeVar("T")

# Seconds each component may take to become ready (a loaded 2-core machine is slow).
STARTUP_TIMEOUT_ENV = "DISTGNN_CONTROLPLANE_STARTUP_TIMEOUT"
DEFAULT_STARTUP_TIMEOUT = 120.0

# --- the control plane --------------------------------------------------------------


@dataclass
class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on loopback.

    Start it with ``ControlPlane.start(bin_dir)``; ``stop()`` ends every process.
    """

    bin_dir: Path
    workdir: Path
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    server: str = ""
    version: str = ""
    components: list[Component] = field(default_factory=list)
    # Started by tests through start_component(); stopped with the rest, not health-checked.
    extra_components: list[Component] = field(default_factory=list)
    startup_seconds: float = 0.0
    keep_logs: bool = False
    _ports: PortAllocator = field(default_factory=PortAllocator)
    _pki: Pki | None = None

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate in group system:masters)."""
        return self.workdir / "admin.kubeconfig"

    @property
    def pki(self) -> Pki:
        if self._pki is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._pki

    @classmethod
    def start(
        cls,
        bin_dir: Path,
        workdir: Path | None = None,
        startup_timeout: float | None = None,
    ) -> ControlPlane:
        """Start every component and wait until the fake nodes are Ready. On failure
        everything started so far is stopped and the logs are kept."""
        if startup_timeout is None:
            startup_timeout = float(os.environ.get(STARTUP_TIMEOUT_ENV, DEFAULT_STARTUP_TIMEOUT))
        if workdir is None:
            workdir = Path(tempfile.mkdtemp(prefix="distgnn-controlplane-"))
        plane = cls(bin_dir=bin_dir, workdir=workdir, startup_timeout=startup_timeout)
        began = time.monotonic()
        try:
            plane._start_all()
        except BaseException:
            plane.keep_logs = True
            plane.stop()
            raise
        plane.startup_seconds = time.monotonic() - began
        return plane

    # -- startup --

    def _start_all(self) -> None:
        missing = missing_binaries(self.bin_dir)
        if missing:
            raise ControlPlaneError(f"{self.bin_dir} lacks {', '.join(missing)}")
        self._pki = pki = make_pki(self.workdir / "pki")
        api_port = self._ports.take()
        self.server = f"https://127.0.0.1:{api_port}"
        write_admin_kubeconfig(self.kubeconfig, self.server, pki)

        etcd_url = self._start_etcd()
        self._start_apiserver(api_port, etcd_url)
        self.version = str(json.loads(self._api_get("/version"))["gitVersion"])
        controller_manager = self._launch_controller_manager()
        scheduler = self._launch_scheduler()
        self._wait(controller_manager[0], controller_manager[1])
        self._wait(scheduler[0], scheduler[1])
        self._create_nodes_and_storage_class()
        self._start_kwok()

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def _wait(self, component: Component, ready: Callable[[], bool]) -> None:
        wait_ready(component, ready, self.startup_timeout)

    def start_component(
        self,
        name: str,
        argv: Sequence[str],
        ready: Callable[[], bool],
        timeout: float | None = None,
        log_name: str | None = None,
    ) -> Component:
        """Start one more process under this control plane's supervision: it logs to
        ``log_dir/<log_name or name>.log`` and is stopped by ``stop()``. A failure to start
        raises ComponentError naming ``name`` and the log (the process is stopped)."""
        component = launch(name, argv, self._log(log_name or name))
        self.extra_components.append(component)
        try:
            wait_ready(component, ready, self.startup_timeout if timeout is None else timeout)
        except BaseException:
            component.stop()
            self.extra_components.remove(component)
            raise
        return component

    def _start_core(self, name: str, argv: Sequence[str], ready: Callable[[], bool]) -> None:
        component = launch(name, argv, self._log(name))
        self.components.append(component)
        self._wait(component, ready)

    def _start_etcd(self) -> str:
        client, peer = self._ports.take(), self._ports.take()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        argv = [
            self._bin("etcd"),
            "--name=distgnn-test",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=distgnn-test={peer_url}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]
        self._start_core(
            "etcd", argv, lambda: '"health":"true"' in http_get(f"{client_url}/health")
        )
        return client_url

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _api_get(self, path: str) -> str:
        return http_get(f"{self.server}{path}", self._admin_context())

    def _start_apiserver(self, port: int, etcd_url: str) -> None:
        pki = self.pki
        argv = [
            self._bin("kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'apiserver'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--profiling=false",
        ]
        context = self._admin_context()
        self._start_core(
            "kube-apiserver", argv, lambda: http_get(f"{self.server}/readyz", context) == "ok"
        )

    def _launch_controller_manager(self) -> tuple[Component, Callable[[], bool]]:
        pki, port = self.pki, self._ports.take()
        argv = [
            self._bin("kube-controller-manager"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'kube-controller-manager'}",
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--leader-elect=false",
            "--profiling=false",
        ]
        component = launch("kube-controller-manager", argv, self._log("kube-controller-manager"))
        self.components.append(component)
        insecure = insecure_context()

        def ready() -> bool:
            # Healthy, and the service-account controller has run: new namespaces work.
            healthy = http_get(f"https://127.0.0.1:{port}/healthz", insecure) == "ok"
            return healthy and bool(
                self._api_get("/api/v1/namespaces/default/serviceaccounts/default")
            )

        return component, ready

    def _launch_scheduler(self) -> tuple[Component, Callable[[], bool]]:
        port = self._ports.take()
        argv = [
            self._bin("kube-scheduler"),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / 'kube-scheduler'}",
            "--leader-elect=false",
            "--profiling=false",
        ]
        component = launch("kube-scheduler", argv, self._log("kube-scheduler"))
        self.components.append(component)
        insecure = insecure_context()
        return component, lambda: http_get(f"https://127.0.0.1:{port}/healthz", insecure) == "ok"

    def _create_nodes_and_storage_class(self) -> None:
        self.kubectl("create", "-f", "-", input=yaml.safe_dump_all(cluster_objects()))

    def _start_kwok(self) -> None:
        port = self._ports.take()
        argv = [
            self._bin("kwok"),
            f"--kubeconfig={self.kubeconfig}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--config={KWOK_STAGES}",
            f"--cidr={POD_CIDR}",
            f"--node-ip={NODE_IP}",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{port}",
        ]

        def ready() -> bool:
            http_get(f"http://127.0.0.1:{port}/healthz")
            nodes = json.loads(self._api_get("/api/v1/nodes"))["items"]
            unready = {n.name for n in NODES} - {
                node["metadata"]["name"] for node in nodes if node_schedulable(node)
            }
            if unready:
                raise ControlPlaneError(f"nodes not Ready and untainted yet: {sorted(unready)}")
            return True

        self._start_core("kwok", argv, ready)

    # -- use --

    def kubectl(
        self,
        *args: str,
        kubeconfig: Path | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl (admin unless ``kubeconfig`` is given)."""
        command = [
            self._bin("kubectl"),
            f"--kubeconfig={kubeconfig or self.kubeconfig}",
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
        ]
        result = subprocess.run(
            command, input=input, capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, command, result.stdout, result.stderr)
        return result

    def get_json(self, *args: str, kubeconfig: Path | None = None) -> Any:
        """``kubectl get ARGS -o json``, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json", kubeconfig=kubeconfig).stdout)

    def wait_for(
        self, *args: str, until: Callable[[Any], bool], what: str = "", timeout: float = 60.0
    ) -> Any:
        """Poll ``kubectl get ARGS -o json`` until ``until(obj)`` holds; return that object."""

        def check() -> Any:
            obj = self.get_json(*args)
            return obj if until(obj) else None

        return wait_until(check, timeout, what or f"'kubectl get {shlex.join(args)}' to match")

    def apply(
        self, manifest: dict[str, Any] | list[dict[str, Any]], namespace: str | None = None
    ) -> None:
        """``kubectl apply`` one manifest or a list of them."""
        documents = manifest if isinstance(manifest, list) else [manifest]
        args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
        self.kubectl(*args, input=yaml.safe_dump_all(documents))

    def api_client(self, kubeconfig: Path | None = None) -> ApiClient:
        """A kubernetes.client.ApiClient (admin unless ``kubeconfig`` is given)."""
        from kubernetes import config

        client: ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig or self.kubeconfig)
        )
        return client

    def token_kubeconfig(self, namespace: str, service_account: str, duration: str = "1h") -> Path:
        """A kubeconfig that authenticates as the ServiceAccount, with a TokenRequest token."""
        token = self.kubectl(
            "create", "token", service_account, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        user = f"system:serviceaccount:{namespace}:{service_account}"
        path = self.workdir / "kubeconfigs" / f"{namespace}.{service_account}.kubeconfig"
        return write_kubeconfig(path, self.server, self.pki.ca_cert, user, {"token": token})

    def create_pv(
        self,
        name: str,
        size: str = "10Gi",
        access_modes: Sequence[str] = ("ReadWriteMany",),
        storage_class: str = TEST_STORAGE_CLASS,
        claim: tuple[str, str] | None = None,
    ) -> str:
        """Create a hostPath PersistentVolume; ``claim=(namespace, name)`` reserves it for
        that claim, so another test's claim cannot take it. Returns the PV name."""
        path = self.workdir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        spec: dict[str, Any] = {
            "capacity": {"storage": size},
            "accessModes": list(access_modes),
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "hostPath": {"path": str(path), "type": "Directory"},
        }
        if claim is not None:
            spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
        manifest = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"distgnn.io/test-volume": "true"}},
            "spec": spec,
        }
        self.kubectl("create", "-f", "-", input=json.dumps(manifest))
        return name

    def create_namespace(self, hint: str = "test") -> str:
        """Create a uniquely named namespace and wait for its default ServiceAccount."""
        base = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40].strip("-") or "test"
        name = f"{base}-{secrets.token_hex(3)}"
        self.kubectl("create", "namespace", name)
        deadline = time.monotonic() + 60
        while True:
            try:
                self._api_get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
                return name
            except ControlPlaneError:
                if time.monotonic() > deadline:
                    self.check_alive()
                    raise
                time.sleep(0.1)

    def delete_namespace(self, name: str) -> None:
        self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)

    def check_alive(self) -> None:
        """Raise ComponentError if any component has exited."""
        for component in self.components:
            code = component.process.poll()
            if code is not None:
                raise ComponentError(
                    component.name,
                    component.log_path,
                    f"exited with code {code} while tests were running",
                    component.log_tail(),
                )

    def log_tails(self, lines: int = 30) -> str:
        """The last lines of every component's log, for a failing test's report."""
        parts = []
        for component in self.components:
            state = "running" if component.running else f"exited {component.process.poll()}"
            parts.append(f"==> {component.log_path} ({component.name}, {state}) <==")
            parts.append(component.log_tail(lines))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop every component (newest first); drop the work dir, keeping the logs if
        ``keep_logs`` is set."""
        for component in reversed(self.components + self.extra_components):
            component.stop()
        if not self.workdir.exists():
            return
        if not self.keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)
            return
        for child in self.workdir.iterdir():
            if child != self.log_dir:
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)


def wait_until(condition: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``condition`` until it returns something other than None/False; raise
    TimeoutError naming ``what`` and the last value seen otherwise."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        last = condition()
        if last is not None and last is not False:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.25)
