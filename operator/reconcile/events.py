"""Kubernetes Events on a DistGNNJob, so `kubectl describe dgj` explains every transition."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from distgnn_api.spec import Condition, DistGNNJobStatus
from distgnn_operator.constants import (
    CAPACITY_SHORT,
    COND_BLOCKED,
    COND_FAILED,
    EVENT_COMPONENT,
    GANG_RESTART,
    PARTITION_FAILED,
)
from distgnn_operator.reconcile.kube_api import KubeApi
from distgnn_operator.status.timestamps import format_time

log = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

_WARNING_REASONS = frozenset({GANG_RESTART.reason, PARTITION_FAILED.reason, CAPACITY_SHORT.reason})


def event_manifest(
    job: Mapping[str, Any], type_: EventType, reason: str, message: str, now: datetime
) -> dict[str, Any]:
    """A core/v1 Event about the job."""
    meta = job["metadata"]
    stamp = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "type": type_,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": socket.gethostname()[:128],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _is_warning(cond: Condition) -> bool:
    if cond.type in (COND_FAILED, COND_BLOCKED) and cond.status == "True":
        return True
    return cond.reason in _WARNING_REASONS


def _changed(old: Condition | None, new: Condition) -> bool:
    """A new status or reason; for Blocked also a new message (each refusal is reported)."""
    if old is None or (old.status, old.reason) != (new.status, new.reason):
        return True
    return new.type == COND_BLOCKED and new.status == "True" and old.message != new.message


def transitions(
    previous: DistGNNJobStatus | None, current: DistGNNJobStatus
) -> list[tuple[EventType, str, str]]:
    """Events for every condition whose status or reason changed, and for every gang restart."""
    before = {c.type: c for c in (previous.conditions if previous else [])}
    out: list[tuple[EventType, str, str]] = []
    # Failed first: a Blocked condition that shares its reason adds nothing to it.
    for cond in sorted(current.conditions, key=lambda c: c.type != COND_FAILED):
        old = before.get(cond.type)
        if cond.reason == GANG_RESTART.reason:
            continue
        if _changed(old, cond):
            out.append(("Warning" if _is_warning(cond) else "Normal", cond.reason, cond.message))
    if current.restarts > (previous.restarts if previous else 0):
        training = next((c for c in current.conditions if c.reason == GANG_RESTART.reason), None)
        message = training.message if training else f"gang restart {current.restarts}"
        out.append(("Warning", GANG_RESTART.reason, message))
    # A condition flipped False by an exclusive one repeats its reason: report it once.
    out.sort(key=lambda e: e[0] != "Warning")
    seen: set[str] = set()
    unique = []
    for event in out:
        if event[1] not in seen:
            seen.add(event[1])
            unique.append(event)
    return unique


def record(
    api: KubeApi,
    job: Mapping[str, Any],
    type_: EventType,
    reason: str,
    message: str,
    now: datetime,
) -> None:
    """Post one Event; losing an Event never fails a reconcile."""
    try:
        api.create(event_manifest(job, type_, reason, message, now))
    except Exception as err:
        log.warning("could not post event %s on %s: %s", reason, job["metadata"]["name"], err)
