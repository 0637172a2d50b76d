"""The sampler and trainer StatefulSets: pod ordinal = rank, both governed by the headless
Service, started in parallel, and replaced only when the operator deletes their pods."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from distgnn_api.contract import Role
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.builders.pod_template import build_pod_template
from distgnn_operator.constants import (
    ANNOTATION_TEMPLATE_HASH,
    LABEL_PEER,
    LABEL_RESTART_GENERATION,
    PEER_TRUE,
)

STATEFUL_ROLES = (Role.sampler, Role.trainer)


def template_hash(template: dict[str, Any]) -> str:
    """A short digest of a pod template, to tell whether a StatefulSet needs re-applying."""
    blob = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def build_statefulset(ctx: JobContext, role: Role) -> dict[str, Any]:
    """StatefulSet <job>-<role> with the spec's replicas (the operator scales it to 0 to suspend
    or clean up). OnDelete: a gang restart bumps the template's restart generation and deletes
    the pods itself, so pods never roll one by one."""
    if role not in STATEFUL_ROLES:
        raise ValueError(f"role {role.value!r} has no StatefulSet; use sampler or trainer")
    labels = naming.role_labels(ctx.name, role, ctx.spec.scheduling.labels)
    pod_labels = {
        **labels,
        LABEL_PEER: PEER_TRUE,
        LABEL_RESTART_GENERATION: str(ctx.restart_generation),
    }
    template = build_pod_template(ctx, role, pod_labels, restart_policy="Always")
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": naming.statefulset_name(ctx.name, role),
            "namespace": ctx.namespace,
            "labels": labels,
            "annotations": {ANNOTATION_TEMPLATE_HASH: template_hash(template)},
        },
        "spec": {
            "replicas": ctx.replicas(role),
            "serviceName": naming.service_name(ctx.name),
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": naming.role_selector(ctx.name, role)},
            "template": template,
        },
    }
