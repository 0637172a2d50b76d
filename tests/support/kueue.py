"""The real Kueue controller manager against the test control plane, with its webhooks.

- The binary and the CRDs come from the pinned Go module (``hack/build-kueue.sh``).
- Kueue runs as a cluster that runs other Jobs has it: its batch/Job integration is on, with
  its webhooks, and DistGNNJob is one of its ``integrations.externalFrameworks`` (what the
  README asks of a cluster), so that Kueue counts the operator's children as parts of a job
  it manages and neither queues nor suspends them on their own.
- Kueue serves its webhooks on loopback with a certificate of the cluster CA that this module
  issues (internal cert management is off). The API server reaches them by URL: the module's
  MutatingWebhookConfiguration and ValidatingWebhookConfiguration entries for Kueue's own API
  (``kueue.x-k8s.io``) and for batch Jobs are registered with ``clientConfig.url``, and the
  CRDs whose module kustomization adds a conversion webhook get one at ``/convert``.
- With internal cert management off, Kueue v0.17 reads its metrics certificate from the fixed
  path /etc/kueue/metrics/certs (cmd/kueue/main.go). The process runs in a private mount
  namespace where /etc is an overlay, so that path exists for it alone.
"""

from __future__ import annotations

import base64
import copy
import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distgnn_api.spec import GROUP, KIND, VERSION
from tests.support.controlplane import ControlPlane
from tests.support.controlplane_binaries import REPO_ROOT
from tests.support.controlplane_client import wait_until
from tests.support.controlplane_errors import ControlPlaneError
from tests.support.controlplane_pki import issue_serving_cert
from tests.support.controlplane_processes import Component, PortAllocator, http_get

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-kueue.sh"
KUEUE_NAMESPACE = "kueue-system"
WEBHOOK_PREFIX = "distgnn-test-kueue"
# CRDs the module's config/components/crd/kustomization.yaml gives a conversion webhook.
CONVERTED_CRDS = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
# The API groups whose webhooks are registered: Kueue's own, and batch for its Job integration.
WEBHOOK_GROUPS = ({"kueue.x-k8s.io"}, {"batch"})
DISTGNN_FRAMEWORK = f"{KIND}.{VERSION}.{GROUP}"  # Kind.version.group, as Kueue's config asks
METRICS_CERT_DIR = "/etc/kueue/metrics/certs"  # fixed in Kueue's cmd/kueue/main.go


def built() -> bool:
    """Whether the pinned Kueue is built (the build script's stamp says so)."""
    return subprocess.run(["bash", str(BUILD_SCRIPT), "--check"]).returncode == 0


def build() -> tuple[Path, Path]:
    """(the kueue binary, the module's source dir), building it first when not cached."""
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
    if out.returncode != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed (exit {out.returncode}):\n{out.stderr}")
    bin_dir = Path(out.stdout.strip().splitlines()[-1])
    module = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-module-dir"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return bin_dir / "kueue", Path(module)


def install_crds(plane: ControlPlane, module: Path, ca_bundle: str, port: int) -> None:
    """Apply the module's CRDs, with the conversion webhook pointed at Kueue on loopback."""
    docs = []
    for path in sorted((module / "config/components/crd/bases").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc["spec"]["names"]["plural"] in CONVERTED_CRDS:
            doc["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/convert",
                        "caBundle": ca_bundle,
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
        docs.append(doc)
    plane.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs)
    )
    for doc in docs:
        plane.kubectl(
            "wait", "--for=condition=Established", f"crd/{doc['metadata']['name']}",
            "--timeout=60s",
        )  # fmt: skip


def webhook_configurations(module: Path, ca_bundle: str, port: int) -> list[dict[str, Any]]:
    """The module's webhook configurations, reduced to Kueue's own API and batch Jobs (the
    enabled integration), served by URL."""
    out = []
    for doc in yaml.safe_load_all(
        (module / "config/components/webhook/manifests.yaml").read_text()
    ):
        if not doc:
            continue
        hooks = []
        for hook in doc["webhooks"]:
            groups = {g for rule in hook["rules"] for g in rule["apiGroups"]}
            if groups not in WEBHOOK_GROUPS:
                continue
            hook = copy.deepcopy(hook)
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
            hooks.append(hook)
        kind = "mutating" if doc["kind"].startswith("Mutating") else "validating"
        out.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": f"{WEBHOOK_PREFIX}-{kind}"},
                "webhooks": hooks,
            }
        )
    return out


def configuration(ports: dict[str, int], cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration: loopback ports, our certificates, no leader election."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["webhook"], "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job"], "externalFrameworks": [DISTGNN_FRAMEWORK]},
    }


def _private_etc_command(workdir: Path, cert: Path, key: Path, argv: list[str]) -> list[str]:
    """argv run in a private mount namespace whose /etc carries the metrics certificate."""
    upper, work = workdir / "etc-upper", workdir / "etc-work"
    upper.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    script = " && ".join(
        [
            f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc",
            f"mkdir -p {METRICS_CERT_DIR}",
            f"cp {shlex.quote(str(cert))} {METRICS_CERT_DIR}/tls.crt",
            f"cp {shlex.quote(str(key))} {METRICS_CERT_DIR}/tls.key",
            f"exec {shlex.join(argv)}",
        ]
    )
    unshare = shutil.which("unshare")
    if unshare is None:
        raise ControlPlaneError(
            "util-linux's unshare is needed to run Kueue (see tests/support/kueue.py)"
        )
    return [unshare, "--mount", "--propagation", "private", "sh", "-c", script]


@dataclass
class Kueue:
    """A running Kueue controller manager."""

    component: Component
    webhook_names: tuple[str, ...]
    version: str

    def stop(self, plane: ControlPlane) -> None:
        for name in self.webhook_names:
            kind = (
                "mutatingwebhookconfiguration"
                if "mutating" in name
                else "validatingwebhookconfiguration"
            )
            plane.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        self.component.stop()
        if self.component in plane.extra_components:
            plane.extra_components.remove(self.component)


def start(plane: ControlPlane) -> Kueue:
    """Build (cached), install the CRDs and webhooks, and run Kueue until it is ready."""
    binary, module = build()
    workdir = plane.workdir / "kueue"
    cert, key = issue_serving_cert(plane.pki, workdir / "certs", "kueue-webhook")
    ca_bundle = base64.b64encode(plane.pki.ca_cert.read_bytes()).decode()
    allocator = PortAllocator()
    ports = {name: allocator.take() for name in ("webhook", "metrics", "health")}
    plane.kubectl("create", "namespace", KUEUE_NAMESPACE, check=False)
    install_crds(plane, module, ca_bundle, ports["webhook"])
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(configuration(ports, cert.parent)))
    argv = [
        str(binary),
        f"--config={config_path}",
        f"--kubeconfig={plane.kubeconfig}",
        "--feature-gates=VisibilityOnDemand=false",
        "--zap-log-level=3",
    ]
    component = plane.start_component(
        "kueue",
        _private_etc_command(workdir, cert, key, argv),
        ready=lambda: http_get(f"http://127.0.0.1:{ports['health']}/readyz") == "ok",
        timeout=180,
    )
    webhooks = webhook_configurations(module, ca_bundle, ports["webhook"])
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(webhooks))
    names = tuple(w["metadata"]["name"] for w in webhooks)
    # The API server calls the webhooks from now on: wait until a webhook-checked write passes.
    probe = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "distgnn-webhook-probe"},
    }

    def webhooks_answer() -> bool:
        done = plane.kubectl("apply", "-f", "-", input=json.dumps(probe), check=False)
        return done.returncode == 0

    wait_until(webhooks_answer, 60, "Kueue's webhooks to answer the API server")
    plane.kubectl("delete", "resourceflavor", "distgnn-webhook-probe", "--wait=false", check=False)
    version = module.name.split("@", 1)[-1]
    return Kueue(component, names, version)
