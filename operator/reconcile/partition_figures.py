"""The partition Job's figures (step durations, edge cut, balance) for the operator's metrics.

The partition container writes :class:`PartitionFigures` as its termination message and exits
before any scrape. The operator reads the message from the Job's succeeded pod and keeps it
on the claim, beside the partition marker, so a later job that reuses the partition (and
starts no pod) reports the same figures.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from distgnn_api.contract import PartitionFigures
from distgnn_operator import naming
from distgnn_operator.builders import JobContext
from distgnn_operator.reconcile.kube_api import POD, PVC, KubeApi
from distgnn_operator.reconcile.observe import Children
from distgnn_operator.status import PartitionJobView

log = logging.getLogger(__name__)


def parse_figures(raw: str | None, where: str) -> PartitionFigures | None:
    """The figures in a termination message or annotation; None when absent or not figures
    (a failed container's message is its log tail)."""
    if not raw:
        return None
    try:
        return PartitionFigures.model_validate_json(raw)
    except ValidationError as err:
        log.debug("%s holds no partition figures: %s", where, err)
        return None


def figures_on_claim(claim: Mapping[str, Any] | None, key: str) -> PartitionFigures | None:
    """The figures kept on the claim for the partition set ``key``."""
    annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    return parse_figures(annotations.get(naming.partition_figures_annotation(key)), "the claim")


def figures_of_pod(pod: Mapping[str, Any]) -> PartitionFigures | None:
    """The figures a succeeded partition container left as its termination message."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode") == 0:
            name = (pod.get("metadata") or {}).get("name", "?")
            found = parse_figures(terminated.get("message"), f"pod {name}")
            if found is not None:
                return found
    return None


def observe_figures(api: KubeApi, ctx: JobContext, children: Children) -> PartitionFigures | None:
    """The figures of the job's partition: from the claim, else from the completed partition
    Job's pod (then written to the claim once the partition marker is there)."""
    key = ctx.partition_key
    kept = figures_on_claim(children.claim, key)
    if kept is not None:
        return kept
    job = children.partition_job
    if job is None or not PartitionJobView.from_job(job).complete:
        return None
    selector = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not selector:
        return None
    figures = next(
        (f for f in map(figures_of_pod, _pods_of(api, ctx, children, selector)) if f is not None),
        None,
    )
    if figures is not None and children.claim is not None and children.partition_marker(key):
        annotation = naming.partition_figures_annotation(key)
        body = {"metadata": {"annotations": {annotation: figures.model_dump_json(by_alias=True)}}}
        children.claim = api.patch(PVC, ctx.namespace, ctx.claim_name, body)
    return figures


def _pods_of(
    api: KubeApi, ctx: JobContext, children: Children, selector: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The partition Job's pods: among the job's pods when the reconcile read them (the pod
    template carries the job's label), else (or when an adopted Job's pods lack the label)
    listed by the Job's selector."""
    found = [
        p
        for p in (children.pods if children.pods_read else ())
        if all(
            ((p.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items()
        )
    ]
    return found or api.list(POD, ctx.namespace, selector)
