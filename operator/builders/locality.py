"""Where a trainer pod should run: near a sampler of its job (server-client mode).

A trainer draws its mini-batches from the sampler on its own GPU, else on its own node, and
from remote samplers only when no sampler shares its node (see the workload's
``runtime/seeds.py``: processes announce their node, from ``DISTGNN_NODE_NAME``, and their
GPU at the rendezvous). The scheduler is asked to make that possible: trainer pods prefer,
with the highest weight, nodes that run a sampler pod of the same job. It is a preference,
not a requirement, so a job still schedules when no node fits both; the user's own
affinity is kept and this term added to it.
"""

from __future__ import annotations

import copy
from typing import Any

from distgnn_api.contract import Role
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext

HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
LOCALITY_WEIGHT = 100


def locality_term(ctx: JobContext, role: Role) -> dict[str, Any] | None:
    """The preferred pod-affinity term of a trainer towards its job's samplers, if any."""
    if role is not Role.trainer or ctx.spec.samplers.replicas == 0:
        return None
    return {
        "weight": LOCALITY_WEIGHT,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": naming.role_selector(ctx.name, Role.sampler)},
            "topologyKey": HOSTNAME_TOPOLOGY,
        },
    }


def with_locality(
    ctx: JobContext, role: Role, affinity: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``affinity`` (the user's, untouched) plus the locality term of ``role``."""
    term = locality_term(ctx, role)
    if term is None:
        return affinity
    merged = copy.deepcopy(affinity) if affinity else {}
    pod_affinity = merged.setdefault("podAffinity", {})
    pod_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(term)
    return merged
