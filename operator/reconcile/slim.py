"""What the operator's indexes keep of a watched object: the fields a reconcile reads.

kopf's indexes hold one entry per indexed object for as long as it lives, so at a few
hundred jobs the objects' bulk is most of the operator's memory. A reconcile reads a child's
metadata (name, uid, labels, annotations, ownerReferences, resourceVersion, deletion) and
status, and few of its spec's fields; a controller's pod template (rendered again from the
job's spec whenever it is needed) and managedFields are most of an object, and go:

- every object: ``metadata.managedFields``;
- a Pod: its spec but the containers' names (their count is read);
- a StatefulSet or a Job: ``spec.template`` and ``spec.volumeClaimTemplates``;
- a ConfigMap: its data (the reconcile only creates or adopts it);
- a DistGNNJob: kopf's copy of the last handled spec (an annotation as large as the spec).

A slimmed object is only read; every write the reconcile sends is rendered from the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distgnn_operator.constants import KOPF_PREFIX
from distgnn_operator.reconcile.kube_api import CONFIG_MAP, DISTGNNJOB, JOB, POD, STATEFULSET, Kind

KOPF_DIFFBASE = f"{KOPF_PREFIX}/last-handled-configuration"
"""kopf's diff-base annotation on a job (settings.persistence.diffbase_storage)."""

_TEMPLATES = ("template", "volumeClaimTemplates")


def slim(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of ``obj`` without the fields no reconcile reads (the rest is shared)."""
    out = dict(obj)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    if kind == DISTGNNJOB and KOPF_DIFFBASE in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != KOPF_DIFFBASE}
    out["metadata"] = meta
    spec = obj.get("spec")
    if kind == POD and isinstance(spec, Mapping):
        containers = spec.get("containers") or []
        out["spec"] = {"containers": [{"name": c.get("name")} for c in containers]}
    elif kind in (STATEFULSET, JOB) and isinstance(spec, Mapping):
        out["spec"] = {k: v for k, v in spec.items() if k not in _TEMPLATES}
    elif kind == CONFIG_MAP:
        out.pop("data", None)
        out.pop("binaryData", None)
    return out
