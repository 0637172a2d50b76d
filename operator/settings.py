"""Operator settings, read from DISTGNN_OPERATOR_* environment variables (pydantic-settings).

The chart sets NAMESPACES, PEERING, METRICS_PORT, HEALTH_PORT, LOG_LEVEL, POD_NAME,
POD_NAMESPACE and POD_LABELS; the rest keep their defaults unless ``operator.extraEnv`` sets them.
"""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from distgnn_operator.status.capacity_policy import CapacityPolicy

ENV_PREFIX = "DISTGNN_OPERATOR_"


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _json_map(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else {}
    return value


class OperatorSettings(BaseSettings):
    """How one operator process runs."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="ignore")

    namespaces: Annotated[list[str], NoDecode, BeforeValidator(_comma_list)] = Field(
        default_factory=list
    )
    """Namespaces to serve (comma-separated); empty serves the whole cluster."""
    peering: str = ""
    """kopf peering object shared by replicas; empty runs standalone (one replica only)."""
    peering_priority: int | None = Field(default=None, ge=0, le=2**31 - 1)
    """This replica's peering priority; the highest active one works, the others wait.

    Unset picks a random one per process: kopf lets replicas of equal priority all work, and a
    Deployment cannot hand each of its pods its own number."""

    metrics_port: int = Field(default=9400, ge=0, le=65535)
    """Port of the operator's Prometheus /metrics; 0 turns it off."""
    health_port: int = Field(default=8080, ge=0, le=65535)
    """Port of kopf's liveness endpoint /healthz; 0 turns it off."""
    log_level: str = "INFO"
    """DEBUG, INFO, WARNING or ERROR."""
    pod_name: str = ""
    """This replica's pod name (peering identity and Event reporter)."""
    pod_namespace: str = ""
    """The operator's namespace: job NetworkPolicies admit its pods to the metrics port."""
    pod_labels: Annotated[dict[str, str], NoDecode, BeforeValidator(_json_map)] = Field(
        default_factory=lambda: {"app.kubernetes.io/component": "operator"}
    )
    """Labels of the operator's pods (JSON object), for the same NetworkPolicy rule."""
    progress_poll_interval: float = Field(default=10.0, gt=0)
    """Seconds between periodic reconciles, which also read trainer 0's /progress."""
    poll_rate: float = Field(default=10.0, gt=0)
    """Periodic reconciles a second at most, over all jobs: with more jobs than
    ``poll_rate * progress_poll_interval``, each job's are spread further apart (and its
    deadline or TTL falls due up to that much later)."""
    progress_timeout: float = Field(default=1.0, gt=0)
    """Seconds to wait for /progress before skipping it."""
    workers: int = Field(default=8, ge=1, le=256)
    """Threads that run reconciles (each job is reconciled by one at a time)."""
    kubeconfig: str | None = None
    """A kubeconfig file; unset uses the in-cluster account, then ~/.kube/config."""
    watch_server_timeout: int = Field(default=300, ge=1)
    """Seconds the API server keeps a watch open before kopf reconnects."""
    watch_client_timeout: int = Field(default=330, ge=1)
    """Client-side timeout of a watch request (a little above the server's)."""
    connect_timeout: int = Field(default=30, ge=1)
    """Seconds to connect to the API server."""
    child_rejection_limit: int = Field(default=5, ge=1, le=100)
    """Attempts at a child the API server refuses (400, 422, or 403 on a forbidden field)
    before the job is Failed with reason ChildRejected."""
    capacity_policy: CapacityPolicy = CapacityPolicy.warn
    """A job whose resources cannot hold its capacity plan: warn (condition CapacityFits=False
    and a Warning Event), fail (also Failed before training starts) or off."""
    gpu_memory_gib: float = Field(default=80.0, gt=0, le=4096)
    """Memory of one GPU of the cluster's nodes in GiB, for the capacity plan."""
    kueue: bool = False
    """Queue jobs labelled kueue.x-k8s.io/queue-name in Kueue (each gets a Workload); the chart
    sets it with kueue.enabled, which also grants the RBAC on Kueue's objects."""
    slow_reconcile_seconds: float = Field(default=2.0, ge=0)
    """A reconcile that takes longer is logged (WARNING) with every API request it sent, when
    each began and how long it took; 0 logs none."""
    retry_backoff_seconds: float = Field(default=2.0, gt=0)
    """First delay before a failed reconcile is retried; it doubles with each retry."""
    retry_backoff_max_seconds: float = Field(default=60.0, gt=0)
    """Longest delay between retries of a failed reconcile."""

    @property
    def gpu_memory(self) -> int:
        """Bytes of one GPU."""
        return int(self.gpu_memory_gib * (1 << 30))

    def retry_delay(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (0 for the first) of a failed reconcile."""
        return float(min(self.retry_backoff_max_seconds, self.retry_backoff_seconds * 2**retry))

    def effective_peering_priority(self) -> int:
        """The priority this process announces in the peering object."""
        if self.peering_priority is not None:
            return self.peering_priority
        return secrets.randbelow(2**31 - 1) + 1
