"""One test's Kueue objects (ResourceFlavors, a ClusterQueue and its LocalQueues, priority
classes) and the jobs queued in them, for the Kueue scenarios of the integration tier (the
Kueue controller itself: tests/support/kueue.py)."""

from __future__ import annotations

import json
import secrets
from typing import Any

from distgnn_operator import naming
from distgnn_operator.reconcile.kube_api import WORKLOAD
from tests.operator.harness import Cluster, job_manifest, wait_for
from tests.support.controlplane import ControlPlane

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
POOL_LABEL = "distgnn.io/test-pool"


class Queues:
    """One test's Kueue objects: flavors, a ClusterQueue and a LocalQueue named `user`."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.ns = namespace
        self.suffix = secrets.token_hex(3)
        self.cluster_queue = f"cq-{self.suffix}"
        self.cluster_scoped: list[str] = []

    def name(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    def apply(self, doc: dict[str, Any]) -> None:
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
        if "namespace" not in doc["metadata"]:
            self.cluster_scoped.append(f"{doc['kind'].lower()}/{doc['metadata']['name']}")

    def setup(
        self,
        flavors: dict[str, tuple[dict[str, str], int]],
        preemption: dict[str, Any] | None = None,
        tolerations: dict[str, list[dict[str, str]]] | None = None,
    ) -> None:
        """Flavors (name -> node labels, GPU quota), in that order, and the queues."""
        for flavor, (labels, _) in flavors.items():
            flavor_spec: dict[str, Any] = {"nodeLabels": labels} if labels else {}
            if tolerations and flavor in tolerations:
                flavor_spec["tolerations"] = tolerations[flavor]
            self.apply(
                {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
                 "metadata": {"name": self.name(flavor)}, "spec": flavor_spec}
            )  # fmt: skip
        spec: dict[str, Any] = {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [
                        {"name": self.name(f), "resources": [{"name": GPU, "nominalQuota": q}]}
                        for f, (_, q) in flavors.items()
                    ],
                }
            ],
        }
        if preemption:
            spec["preemption"] = preemption
        self.apply(
            {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
             "metadata": {"name": self.cluster_queue}, "spec": spec}
        )  # fmt: skip
        self.local_queue("user")
        wait_for(
            f"ClusterQueue {self.cluster_queue} active",
            lambda: any(
                c["type"] == "Active" and c["status"] == "True"
                for c in (self.plane.get_json("clusterqueue", self.cluster_queue).get("status") or {}).get("conditions", [])
            ),
        )  # fmt: skip

    def local_queue(self, name: str) -> None:
        """A LocalQueue of the test's namespace into the ClusterQueue (``default`` is the
        one Kueue's webhook gives to Jobs that name no queue: LocalQueueDefaulting)."""
        self.apply(
            {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": name, "namespace": self.ns},
             "spec": {"clusterQueue": self.cluster_queue}}
        )  # fmt: skip

    def priority_class(self, base: str, value: int) -> str:
        name = self.name(base)
        self.apply(
            {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass",
             "metadata": {"name": name}, "value": value}
        )  # fmt: skip
        return name

    def cleanup(self) -> None:
        for ref in reversed(self.cluster_scoped):
            self.plane.kubectl("delete", ref, "--wait=false", "--ignore-not-found", check=False)


def queued(name: str, queue: str = "user", **spec: Any) -> dict[str, Any]:
    manifest = job_manifest(name, **spec)
    manifest["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return manifest


def workload_of(cluster: Cluster, job: str) -> dict[str, Any] | None:
    obj = cluster.job(job)
    assert obj is not None
    return cluster.get(WORKLOAD, naming.workload_name(job, obj["metadata"]["uid"]))


def workload_condition(cluster: Cluster, job: str, type_: str) -> dict[str, Any] | None:
    wl = workload_of(cluster, job) or {}
    conds = (wl.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == type_), None)
