"""The operator's half of Kueue's contract for a job kind Kueue does not know natively.

Kueue's jobframework reconciler does this for the kinds built into Kueue; for a DistGNNJob
labelled ``kueue.x-k8s.io/queue-name`` the operator does the same steps itself:

1. create (and own) one Workload whose pod sets are the job's roles, counts and requests;
2. keep the job's pods away until the Workload is Admitted (the job's phase is Queued);
3. start the pods with the admission's flavors: the ResourceFlavors' node labels and
   tolerations, and the admission checks' podSetUpdates, merged into each role's template;
4. on Evicted=True stop the pods (the partition and checkpoints stay on the volume); once
   none is left, clear the quota reservation so that Kueue queues the Workload again;
5. mark the Workload Finished when the job Succeeds or Fails, so Kueue releases the quota.

A deleted job's Workload goes with it (ownerReference). ``runPolicy.suspend`` maps to the
Workload's ``spec.active``, which is how Kueue deactivates a Workload.

Every error on this path that waiting alone will not fix (a missing WorkloadPriorityClass or
ResourceFlavor, a Workload the API server refuses, no Kueue API or no RBAC for it) keeps the
job Queued with the reason ``KueueError`` and becomes its Blocked condition and a Warning
Event, as a refused child does; the next reconcile tries again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from distgnn_api.contract import Role
from distgnn_api.spec import DistGNNJobStatus, Phase
from distgnn_operator import naming
from distgnn_operator.builders import JobContext, Placement, PlacementConflict, build_workload
from distgnn_operator.builders.placement import place
from distgnn_operator.constants import (
    COND_FAILED,
    COND_SUCCEEDED,
    KUEUE_ERROR,
    KUEUE_FINISHED_FAILED,
    KUEUE_FINISHED_SUCCEEDED,
    KUEUE_REQUEUE_REASON,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
)
from distgnn_operator.reconcile.apply import ChildRejected, ensure
from distgnn_operator.reconcile.kube_api import (
    RESOURCE_FLAVOR,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
    ApiError,
    KubeApi,
)
from distgnn_operator.reconcile.observe import Children
from distgnn_operator.reconcile.status_writes import ReconcileResult
from distgnn_operator.status.admission import (
    REQUEUE_REASONS,
    WL_ADMITTED,
    WL_EVICTED,
    WL_FINISHED,
    WL_QUOTA_RESERVED,
    WL_REQUEUED,
    AdmissionView,
)
from distgnn_operator.status.blockers import Blocker

T = TypeVar("T")


class KueueError(RuntimeError):
    """Kueue's objects cannot serve the job (e.g. a missing WorkloadPriorityClass)."""


# Answers of the API server on Kueue's objects that a retry alone cannot fix.
_LASTING = {400: "invalid", 403: "forbidden", 404: "not found", 422: "invalid"}


def _explain(err: ApiError, what: str) -> KueueError:
    """A KueueError that says what the API server answered on Kueue's objects and why."""
    if err.status == 404:
        hint = (
            "the API server does not serve kueue.x-k8s.io/v1beta2: install Kueue (v0.17 or "
            f"later) or remove the {LABEL_QUEUE_NAME} label"
        )
    elif err.status == 403:
        hint = "the operator lacks RBAC for Kueue's objects: install the chart with kueue.enabled"
    else:
        hint = "Kueue refused it"
    return KueueError(f"{what}: {err.status} {_LASTING[err.status]}: {err.message} ({hint})")


def queue_name(job: Mapping[str, Any]) -> str | None:
    """The LocalQueue a job is queued in: its kueue.x-k8s.io/queue-name label."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_QUEUE_NAME) or None


@dataclass
class Gate:
    """A Kueue-managed job's Workload, as the reconcile found (or created) it. With an
    ``error``, the job's children must not change: a job without an admitted Workload waits
    (its view is not admitted), an admitted one keeps what it runs; ``blockers`` says why."""

    workload: dict[str, Any] | None
    view: AdmissionView
    placements: dict[Role, Placement] = field(default_factory=dict)
    """Each role's placement from the admission (empty until admitted)."""
    error: KueueError | None = None

    @property
    def blockers(self) -> tuple[Blocker, ...]:
        if self.error is None:
            return ()
        return (Blocker(*KUEUE_ERROR.format(message=str(self.error))),)

    @classmethod
    def failed(cls, name: str, queue: str, err: KueueError) -> Gate:
        """No usable Workload: the job waits, Queued with the error's reason."""
        reason, message = KUEUE_ERROR.format(message=str(err))
        view = AdmissionView(workload=name, queue=queue, reason=reason, message=message)
        return cls(None, view, error=err)


def sync_workload(
    api: KubeApi,
    job: Mapping[str, Any],
    ctx: JobContext,
    owner: Mapping[str, Any],
    previous: DistGNNJobStatus | None,
    result: ReconcileResult,
) -> Gate | None:
    """The job's Workload, created when absent, and the admission's placements; None for a
    job without the queue label. An error that a retry alone cannot fix gives a Gate with
    that error (see :class:`Gate`)."""
    queue = queue_name(job)
    if queue is None:
        return None
    name = naming.workload_name(ctx.name, ctx.uid)

    def sync() -> Gate | None:
        workload = api.get(WORKLOAD, ctx.namespace, name)
        finished = previous is not None and previous.phase in (Phase.succeeded, Phase.failed)
        if workload is None:
            if finished:
                return None
            priority_class = (job["metadata"].get("labels") or {}).get(LABEL_PRIORITY_CLASS)
            priority = _priority(api, priority_class) if priority_class else None
            desired = build_workload(ctx, queue, priority_class, priority)
            workload, _ = ensure(api, desired, None, owner)
            result.actions.append(f"create Workload {name} in LocalQueue {queue}")
        else:
            workload = _sync_spec(api, workload, ctx, queue, result)
        return Gate(workload, AdmissionView.from_workload(workload, queue))

    try:
        gate = _lasting(f"Workload {name}", sync)
    except KueueError as err:
        result.actions.append(f"Kueue: {err}")
        return Gate.failed(name, queue, err)
    if gate is not None and gate.view.admitted:
        try:
            gate.placements = _lasting(
                f"the admission of Workload {name}", lambda: placements(api, gate.view)
            )
            _check_placements(ctx, gate.placements)
        except KueueError as err:
            result.actions.append(f"Kueue: {err}")
            gate.error = err
    return gate


def _lasting(what: str, call: Callable[[], T]) -> T:
    """``call()``, with the API server's lasting answers on Kueue's objects as KueueError."""
    try:
        return call()
    except ChildRejected as rejected:
        raise _explain(rejected.error, what) from None
    except ApiError as err:
        if err.status not in _LASTING:
            raise
        raise _explain(err, what) from None


def _priority(api: KubeApi, priority_class: str) -> int:
    found = api.get(WORKLOAD_PRIORITY_CLASS, "", priority_class)
    if found is None:
        raise KueueError(
            f"WorkloadPriorityClass {priority_class!r} (label {LABEL_PRIORITY_CLASS}) does not "
            "exist; create it or remove the label"
        )
    return int(found.get("value", 0))


def _sync_spec(
    api: KubeApi,
    workload: dict[str, Any],
    ctx: JobContext,
    queue: str,
    result: ReconcileResult,
) -> dict[str, Any]:
    """Follow runPolicy.suspend (spec.active) and, while no quota is reserved, the queue."""
    spec = workload.get("spec") or {}
    patch: dict[str, Any] = {}
    active = not ctx.spec.run_policy.suspend
    if bool(spec.get("active", True)) != active:
        patch["active"] = active
    view = AdmissionView.from_workload(workload, queue)
    if spec.get("queueName") != queue and not view.reserved:
        patch["queueName"] = queue
    if not patch:
        return workload
    meta = workload["metadata"]
    result.actions.append(f"patch Workload {meta['name']} {patch}")
    return api.patch(WORKLOAD, ctx.namespace, meta["name"], {"spec": patch})


def placements(api: KubeApi, view: AdmissionView) -> dict[Role, Placement]:
    """Each role's placement from an admitted Workload: its flavors' node labels and
    tolerations (Kueue's podset.FromAssignment), then the admission checks' updates."""
    out: dict[Role, Placement] = {}
    for role in Role:
        flavors = view.flavors.get(role.value, ())
        update = view.pod_set_updates.get(role.value) or {}
        selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for flavor in flavors:
            found = api.get(RESOURCE_FLAVOR, "", flavor)
            if found is None:
                raise KueueError(f"ResourceFlavor {flavor!r} of the admission does not exist")
            spec = found.get("spec") or {}
            selector.update(spec.get("nodeLabels") or {})
            tolerations.extend(spec.get("tolerations") or [])
        selector.update(update.get("nodeSelector") or {})
        tolerations.extend(update.get("tolerations") or [])
        if selector or tolerations or update:
            out[role] = Placement(
                node_selector=selector,
                tolerations=tuple(tolerations),
                labels=dict(update.get("labels") or {}),
                annotations=dict(update.get("annotations") or {}),
            )
    return out


def _check_placements(ctx: JobContext, found: Mapping[Role, Placement]) -> None:
    """A flavor's node label that contradicts spec.scheduling.nodeSelector: a KueueError
    now, rather than a failure of every pod template the actions build."""
    for placement in found.values():
        try:
            place({}, {"nodeSelector": dict(ctx.spec.scheduling.node_selector)}, placement)
        except PlacementConflict as err:
            raise KueueError(str(err)) from None


def _active_pods(children: Children) -> int:
    """Pods of the job that still hold (or may hold) their resources."""
    return sum(
        1
        for pod in children.pods
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


def after_act(
    api: KubeApi,
    gate: Gate,
    status: DistGNNJobStatus,
    children: Children,
    now_time: str,
    result: ReconcileResult,
) -> None:
    """Hand quota back to Kueue: after an eviction once the pods are gone, and at the end."""
    view, workload = gate.view, gate.workload
    if workload is None:
        return
    conditions: list[dict[str, Any]] = list((workload.get("status") or {}).get("conditions") or [])
    status_patch: dict[str, Any] = {}
    if status.phase in (Phase.succeeded, Phase.failed) and not view.finished:
        reason = (
            KUEUE_FINISHED_SUCCEEDED if status.phase is Phase.succeeded else KUEUE_FINISHED_FAILED
        )
        cond = COND_SUCCEEDED if status.phase is Phase.succeeded else COND_FAILED
        message = next((c.message for c in status.conditions if c.type == cond), reason)
        conditions = _set(conditions, WL_FINISHED, "True", reason, message, now_time)
        status_patch["conditions"] = conditions
        result.actions.append(f"finish Workload {view.workload} ({reason})")
    elif view.evicted and view.reserved and _active_pods(children) == 0:
        evicted = next(c for c in conditions if c.get("type") == WL_EVICTED)
        why, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        requeued = "True" if why in REQUEUE_REASONS else "False"
        conditions = _set(conditions, WL_REQUEUED, requeued, why, message, now_time)
        conditions = _set(
            conditions, WL_QUOTA_RESERVED, "False", KUEUE_REQUEUE_REASON, message, now_time
        )
        conditions = _set(
            conditions, WL_ADMITTED, "False", "NoReservation", "The workload has no reservation",
            now_time,
        )  # fmt: skip
        status_patch = {"admission": None, "conditions": conditions}
        result.actions.append(f"release the quota of evicted Workload {view.workload} ({why})")
    if not status_patch:
        return
    meta = workload["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": status_patch}
    api.patch(WORKLOAD, meta["namespace"], meta["name"], body, subresource="status")


def _set(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now_time: str,
) -> list[dict[str, Any]]:
    """A Workload's conditions with one set (metav1.Condition rules: the transition time
    changes only with the status)."""
    out: list[dict[str, Any]] = []
    found = False
    for cond in conditions:
        cond = dict(cond)
        if cond.get("type") == type_:
            found = True
            if cond.get("status") != status:
                cond["lastTransitionTime"] = now_time
            cond.update({"status": status, "reason": reason, "message": message[:32768]})
        out.append(cond)
    if not found:
        out.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message[:32768],
                "lastTransitionTime": now_time,
            }
        )
    return out
