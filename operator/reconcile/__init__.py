"""Reconciling DistGNNJobs: one state machine over an injected API client, with a thin apply
layer (ownerReferences, create-if-absent, server-side apply with a fixed field manager)."""

from distgnn_operator.reconcile.apply import ChildRejected
from distgnn_operator.reconcile.kube_api import ApiError, KubeApi, RestKubeApi
from distgnn_operator.reconcile.state_machine import ReconcileOptions, reconcile_job
from distgnn_operator.reconcile.status_writes import ReconcileResult

__all__ = [
    "ApiError",
    "ChildRejected",
    "KubeApi",
    "ReconcileOptions",
    "ReconcileResult",
    "RestKubeApi",
    "reconcile_job",
]
