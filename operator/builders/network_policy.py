"""The job's NetworkPolicy: every port between its own pods (NCCL and TensorPipe choose ports at
run time), and from outside only the metrics port, only from the monitoring peers and the
operator. torch RPC unpickles what it receives, so nothing else may reach the RPC port.

It is the job's first child, so the partition pod is covered too. It restricts ingress only;
egress is left to the namespace's own policies. An empty monitoringNamespaceSelector selects
every namespace: the CRD admits it only with allowAllNamespaces set."""

from __future__ import annotations

from typing import Any

from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.constants import LABEL_JOB, LABEL_NAMESPACE_NAME


def build_network_policy(ctx: JobContext) -> dict[str, Any] | None:
    """NetworkPolicy <job>-isolation, or None when spec.networkPolicy.enabled is false."""
    np = ctx.spec.network_policy
    if not np.enabled:
        return None
    metrics_port = [{"protocol": "TCP", "port": ctx.spec.metrics_port}]
    scrapers: list[dict[str, Any]] = [
        {
            "namespaceSelector": {"matchLabels": dict(np.monitoring_namespace_selector)},
            "podSelector": {"matchLabels": dict(np.monitoring_pod_selector)},
        }
    ]
    if ctx.operator is not None:
        scrapers.append(
            {
                "namespaceSelector": {
                    "matchLabels": {LABEL_NAMESPACE_NAME: ctx.operator.namespace}
                },
                "podSelector": {"matchLabels": dict(ctx.operator.pod_labels)},
            }
        )

    def job_pods() -> dict[str, Any]:
        return {"matchLabels": {LABEL_JOB: ctx.name}}

    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": naming.network_policy_name(ctx.name),
            "namespace": ctx.namespace,
            "labels": naming.child_labels(ctx.name, ctx.spec.scheduling.labels),
        },
        "spec": {
            "podSelector": job_pods(),
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": job_pods()}]},
                {"from": scrapers, "ports": metrics_port},
            ],
        },
    }
