"""A real Kubernetes control plane on loopback for the integration tests.

It runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake
nodes, some with ``nvidia.com/gpu``) as child processes, each in its own process group
with its own log file, and tears them all down again. The binaries come from
``hack/build-controlplane.sh`` (controlplane_binaries); the PKI and kubeconfigs, the
process launching, the fake nodes and the kubectl helpers live in the sibling
``controlplane_*`` modules.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.controlplane_binaries import missing_binaries
from tests.support.controlplane_client import ClusterClient
from tests.support.controlplane_cluster import (
    KWOK_NODE_ANNOTATION,
    KWOK_STAGES,
    NODE_IP,
    NODES,
    POD_CIDR,
    SERVICE_CIDR,
    cluster_objects,
    node_schedulable,
)
from tests.support.controlplane_errors import ControlPlaneError
from tests.support.controlplane_pki import Pki, make_pki, write_admin_kubeconfig
from tests.support.controlplane_processes import (
    Component,
    PortAllocator,
    http_get,
    insecure_context,
    launch,
    wait_ready,
)

# Seconds each component may take to become ready (a loaded 2-core machine is slow).
STARTUP_TIMEOUT_ENV = "DISTGNN_CONTROLPLANE_STARTUP_TIMEOUT"
DEFAULT_STARTUP_TIMEOUT = 120.0


@dataclass
class ControlPlane(ClusterClient):
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

    def _launch_kube_component(
        self, name: str, *flags: str
    ) -> tuple[Component, Callable[[], bool]]:
        """Start ``name`` (a controller manager or scheduler) against the API server on a
        port of its own, with ``flags`` besides the common ones; also returns its health."""
        port = self._ports.take()
        argv = [
            self._bin(name),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / name}",
            *flags,
            "--leader-elect=false",
            "--profiling=false",
        ]
        component = launch(name, argv, self._log(name))
        self.components.append(component)
        insecure = insecure_context()
        return component, lambda: http_get(f"https://127.0.0.1:{port}/healthz", insecure) == "ok"

    def _launch_controller_manager(self) -> tuple[Component, Callable[[], bool]]:
        pki = self.pki
        component, healthy = self._launch_kube_component(
            "kube-controller-manager",
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
        )

        def ready() -> bool:
            # Healthy, and the service-account controller has run: new namespaces work.
            return healthy() and bool(
                self._api_get("/api/v1/namespaces/default/serviceaccounts/default")
            )

        return component, ready

    def _launch_scheduler(self) -> tuple[Component, Callable[[], bool]]:
        return self._launch_kube_component("kube-scheduler")

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

    # -- health and teardown --

    def check_alive(self) -> None:
        """Raise ComponentError if any component has exited."""
        for component in self.components:
            code = component.process.poll()
            if code is not None:
                raise component.failure(f"exited with code {code} while tests were running")

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
