"""The shared volume's claim, when the spec asks the operator to create one."""

from __future__ import annotations

from typing import Any

from distgnn_api.spec import AccessMode
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext


def access_modes(ctx: JobContext) -> list[str]:
    """The spec's access modes, else ReadWriteMany when more than one pod mounts the claim."""
    modes = ctx.spec.storage.access_modes
    if modes:
        return [m.value for m in modes]
    pods = ctx.spec.samplers.replicas + ctx.spec.trainers.replicas
    return [(AccessMode.read_write_many if pods > 1 else AccessMode.read_write_once).value]


def build_pvc(ctx: JobContext) -> dict[str, Any] | None:
    """PersistentVolumeClaim <job>-data, or None when storage.claimName names an existing one."""
    storage = ctx.spec.storage
    if storage.claim_name:
        return None
    spec: dict[str, Any] = {
        "accessModes": access_modes(ctx),
        "resources": {"requests": {"storage": str(storage.size)}},
        "volumeMode": "Filesystem",
    }
    if storage.storage_class_name is not None:
        spec["storageClassName"] = storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": naming.pvc_name(ctx.name),
            "namespace": ctx.namespace,
            "labels": naming.child_labels(ctx.name, ctx.spec.scheduling.labels),
        },
        "spec": spec,
    }
