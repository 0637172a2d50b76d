"""The kinds of child the operator makes for a job, for the tests that take stock of them."""

from __future__ import annotations

from distgnn_operator.reconcile import kube_api as kinds

OWNED_KINDS: tuple[kinds.Kind, ...] = (
    kinds.CONFIG_MAP,
    kinds.JOB,
    kinds.SERVICE,
    kinds.NETWORK_POLICY,
    kinds.STATEFULSET,
)
"""What garbage collection removes with the job; the claim follows its retention policy."""

CHILD_KINDS: tuple[kinds.Kind, ...] = (kinds.PVC, *OWNED_KINDS)
"""Every kind of child, the claim included."""
