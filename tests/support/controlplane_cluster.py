"""What the test cluster offers: four kwok nodes (two with ``nvidia.com/gpu``), a storage class
for static PersistentVolumes, loopback pod and node addresses, and the annotations kwok acts on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

KWOK_STAGES = Path(__file__).with_name("kwok_stages.yaml")

# Annotating a Running pod with this makes kwok terminate its containers with that code.
EXIT_CODE_ANNOTATION = "kwok.distgnn.io/exit-code"
# kwok manages the nodes that carry this annotation (and only those).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
TEST_STORAGE_CLASS = "distgnn-test"
# Pod and node IPs are loopback addresses, so anything that dials a pod IP stays on
# this machine. (The API server refuses loopback addresses in EndpointSlices, so
# Services that select kwok pods get no endpoints.)
POD_CIDR = "127.64.0.0/16"
NODE_IP = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"


@dataclass(frozen=True)
class FakeNode:
    """A kwok node: its name, capacity and whether it advertises GPUs."""

    name: str
    cpu: str
    memory: str
    gpus: int = 0

    def manifest(self) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": "250"}
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
        }
        if self.gpus:
            capacity[GPU_RESOURCE] = str(self.gpus)
            labels[GPU_PRESENT_LABEL] = "true"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            },
            "status": {"capacity": capacity, "allocatable": dict(capacity)},
        }


NODES = (
    FakeNode("kwok-cpu-0", cpu="32", memory="128Gi"),
    FakeNode("kwok-cpu-1", cpu="32", memory="128Gi"),
    FakeNode("kwok-gpu-0", cpu="64", memory="512Gi", gpus=8),
    FakeNode("kwok-gpu-1", cpu="64", memory="512Gi", gpus=8),
)


def cluster_objects() -> list[dict[str, Any]]:
    """The fake nodes and the test storage class, created once the control plane is up."""
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": TEST_STORAGE_CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
    }
    return [node.manifest() for node in NODES] + [storage_class]


def node_schedulable(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = node.get("spec", {}).get("taints") or []
    return ready and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in taints)
