"""The partition Job: one pod that writes the partition set to the volume."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import EXIT_BAD_INPUT, Role
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext
from distgnn_operator.builders.pod_template import build_pod_template


def build_partition_job(ctx: JobContext) -> dict[str, Any]:
    """Job <job>-partition. Bad input (exit 2) fails it at once instead of retrying."""
    role = Role.partitioner
    labels = naming.role_labels(ctx.name, role, ctx.spec.scheduling.labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": naming.partition_job_name(ctx.name),
            "namespace": ctx.namespace,
            "labels": labels,
        },
        "spec": {
            "suspend": ctx.spec.run_policy.suspend,
            "backoffLimit": ctx.spec.run_policy.backoff_limit,
            "completions": 1,
            "parallelism": 1,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": role.value,
                            "operator": "In",
                            "values": [EXIT_BAD_INPUT],
                        },
                    },
                    # Evictions and preemptions do not count against the backoff limit.
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
                ]
            },
            "template": build_pod_template(ctx, role, labels, restart_policy="Never"),
        },
    }
