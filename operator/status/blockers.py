"""What the cluster says about children that cannot start, read from raw API objects.

The API server accepts a child, and then a controller, the scheduler or the kubelet finds it
cannot go on: the Job controller cannot create the partition pod (``FailedCreate``, e.g. a
quota or an admission policy), a claim does not exist or lost its volume, no node fits a pod,
an image does not pull. Each becomes a :class:`Blocker`, which ``compute_status`` turns into
the job's ``Blocked`` condition and an Event, so that ``kubectl describe dgj`` says what is
wrong without the operator's log. None of them fails the job: each can clear on its own (a
quota frees up, the claim or the image appears).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distgnn_operator import constants
from distgnn_operator.constants import (
    CLAIM_LOST,
    CLAIM_NOT_FOUND,
    CONTAINER_CREATE_FAILED,
    IMAGE_PULL_FAILED,
    KUEUE_MANAGES_CHILD,
    LABEL_QUEUE_NAME,
    POD_UNSCHEDULABLE,
)

FAILED_CREATE = "FailedCreate"  # reason of the Job and StatefulSet controllers' Event

# Container waiting reasons of the kubelet that do not clear by waiting alone.
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
CREATE_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
MESSAGE_LIMIT = 600


@dataclass(frozen=True)
class Blocker:
    """One reason a child cannot be created or started: a condition reason and its message."""

    reason: str
    message: str


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def claim_blockers(
    claim: Mapping[str, Any] | None, claim_name: str, user_claim: bool
) -> list[Blocker]:
    """A claim the spec names that does not exist, or a claim that lost its volume."""
    if claim is None:
        return [Blocker(*CLAIM_NOT_FOUND.format(claim=claim_name))] if user_claim else []
    if (claim.get("status") or {}).get("phase") == "Lost":
        return [Blocker(*CLAIM_LOST.format(claim=claim_name))]
    return []


def still_short_of_pods(kind: str, obj: Mapping[str, Any]) -> bool:
    """The controller has not created the pods it wants (so a FailedCreate still matters)."""
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    if kind == "Job":
        made = sum(int(status.get(k) or 0) for k in ("active", "succeeded", "failed"))
        done = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        return made == 0 and not done and not spec.get("suspend")
    return int(status.get("replicas") or 0) < int(spec.get("replicas") or 0)


def failed_create_blockers(
    controllers: Iterable[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> list[Blocker]:
    """The newest FailedCreate Event of each controller (Job, StatefulSet) still short of pods."""
    out: list[Blocker] = []
    for obj in controllers:
        kind, meta = str(obj.get("kind", "")), _meta(obj)
        if not still_short_of_pods(kind, obj):
            continue
        mine = [
            e
            for e in events
            if (e.get("involvedObject") or {}).get("uid") == meta.get("uid")
            and e.get("reason") == FAILED_CREATE
        ]
        if mine:
            newest = max(
                mine, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")
            )
            out.append(
                Blocker(
                    *constants.FAILED_CREATE.format(
                        kind=kind, name=meta.get("name"), message=_short(newest.get("message", ""))
                    )
                )
            )
    return out


def kueue_blockers(children: Iterable[Mapping[str, Any]]) -> list[Blocker]:
    """Children that Kueue's own integrations queue: the job never labels them with a queue,
    so the label comes from Kueue's webhook (its default LocalQueue, or
    manageJobsWithoutQueueName), and Kueue would suspend them apart from the job."""
    out: list[Blocker] = []
    for obj in children:
        meta = _meta(obj)
        queue = (meta.get("labels") or {}).get(LABEL_QUEUE_NAME)
        if queue:
            kind, name = obj.get("kind", "object"), meta.get("name")
            values = {"kind": kind, "name": name, "label": LABEL_QUEUE_NAME, "queue": queue}
            out.append(Blocker(*KUEUE_MANAGES_CHILD.format(**values)))
    return out


def pod_blockers(pods: Iterable[Mapping[str, Any]]) -> list[Blocker]:
    """Pods the scheduler cannot place, and containers whose image or config is unusable."""
    out: list[Blocker] = []
    for pod in pods:
        meta = _meta(pod)
        if meta.get("deletionTimestamp"):
            continue
        name = meta.get("name")
        status = pod.get("status") or {}
        for cond in status.get("conditions") or []:
            if (
                cond.get("type") == "PodScheduled"
                and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"
            ):
                out.append(
                    Blocker(
                        *POD_UNSCHEDULABLE.format(pod=name, message=_short(cond.get("message", "")))
                    )
                )
        statuses = [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        for cs in statuses:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            why = str(waiting.get("reason") or "")
            message = _short(waiting.get("message") or "")
            if why in IMAGE_PULL_REASONS:
                out.append(
                    Blocker(
                        *IMAGE_PULL_FAILED.format(
                            pod=name, image=cs.get("image", ""), why=why, message=message
                        )
                    )
                )
            elif why in CREATE_REASONS:
                out.append(
                    Blocker(
                        *CONTAINER_CREATE_FAILED.format(
                            pod=name, container=cs.get("name", ""), why=why, message=message
                        )
                    )
                )
    return out
