"""The headless Service that gives every sampler and trainer pod a stable DNS name."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import DDP_PORT, RPC_PORT
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.constants import (
    LABEL_JOB,
    LABEL_PEER,
    PEER_TRUE,
    PORT_DDP,
    PORT_METRICS,
    PORT_RPC,
)


def peer_selector(job: str) -> dict[str, str]:
    """Labels of the job's sampler and trainer pods (not of the partition pod)."""
    return {LABEL_JOB: job, LABEL_PEER: PEER_TRUE}


def build_headless_service(ctx: JobContext) -> dict[str, Any]:
    """Service <job>-peers: clusterIP None, and DNS records before pods are ready (rendezvous
    needs every peer's address while the peers are still starting)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": naming.service_name(ctx.name),
            "namespace": ctx.namespace,
            "labels": naming.child_labels(ctx.name, ctx.spec.scheduling.labels),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": peer_selector(ctx.name),
            "ports": [
                {"name": PORT_RPC, "port": RPC_PORT, "targetPort": PORT_RPC, "protocol": "TCP"},
                {"name": PORT_DDP, "port": DDP_PORT, "targetPort": DDP_PORT, "protocol": "TCP"},
                {
                    "name": PORT_METRICS,
                    "port": ctx.spec.metrics_port,
                    "targetPort": ctx.spec.metrics_port,
                    "protocol": "TCP",
                },
            ],
        },
    }
