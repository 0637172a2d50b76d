"""The ConfigMap that carries the job config JSON every pod reads from ENV_CONFIG."""

from __future__ import annotations

from typing import Any

from distgnn_api.contract import CONFIG_FILE_NAME, job_config_json
from distgnn_operator import naming
from distgnn_operator.builders.context import JobContext


def build_config_map(ctx: JobContext) -> dict[str, Any]:
    """ConfigMap <job>-config with key job.json (the spec with defaults filled in)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": naming.config_map_name(ctx.name),
            "namespace": ctx.namespace,
            "labels": naming.child_labels(ctx.name, ctx.spec.scheduling.labels),
        },
        "data": {CONFIG_FILE_NAME: job_config_json(ctx.name, ctx.namespace, ctx.uid, ctx.spec)},
    }
