"""Client-side helpers against the test cluster: kubectl, parsed ``kubectl get``, apply, polling,
ServiceAccount token kubeconfigs, static PersistentVolumes and throwaway namespaces."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import ssl
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from tests.support.controlplane_cluster import TEST_STORAGE_CLASS
from tests.support.controlplane_errors import ControlPlaneError, KubectlError
from tests.support.controlplane_pki import Pki, write_kubeconfig
from tests.support.controlplane_processes import http_get

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

T = TypeVar("T")


class ClusterClient(ABC):
    """kubectl and API requests against a running cluster, as its admin unless a kubeconfig is
    given. ControlPlane mixes this in and provides the members declared abstract here."""

    bin_dir: Path
    workdir: Path
    server: str

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate in group system:masters)."""
        return self.workdir / "admin.kubeconfig"

    @property
    @abstractmethod
    def pki(self) -> Pki:
        """The cluster's certificates and keys."""

    @abstractmethod
    def check_alive(self) -> None:
        """Raise if a component of the cluster has exited."""

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def _api_get(self, path: str) -> str:
        return http_get(f"{self.server}{path}", self._admin_context())

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
