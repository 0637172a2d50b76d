"""What a job's Kueue Workload says, read from the raw object: admitted or not, why, and
which ResourceFlavor each pod set got.

Kueue's contract for a job it does not know natively (its jobframework reconciler does the
same for the kinds it knows): the job runs only while the Workload's ``Admitted`` condition
is True and its ``Evicted`` condition is not; an evicted job stops its pods, and then the job's
controller clears the quota reservation so that Kueue queues the Workload again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Kueue's Workload condition types (kueue.x-k8s.io/v1beta2).
WL_QUOTA_RESERVED = "QuotaReserved"
WL_ADMITTED = "Admitted"
WL_EVICTED = "Evicted"
WL_FINISHED = "Finished"
WL_REQUEUED = "Requeued"
# Eviction reasons after which Kueue's own integrations set Requeued=True.
REQUEUE_REASONS = frozenset({"Preempted", "NodeFailures"})


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    items: Sequence[Mapping[str, Any]] = (workload.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in items}


def _true(conds: Mapping[str, Mapping[str, Any]], type_: str) -> bool:
    return (conds.get(type_) or {}).get("status") == "True"


@dataclass(frozen=True)
class AdmissionView:
    """The facts of one Workload that the job's status and actions depend on."""

    workload: str
    queue: str
    admitted: bool = False
    """Admitted=True and not Evicted: the job may run."""
    evicted: bool = False
    """Evicted=True: the job must stop its pods."""
    reserved: bool = False
    """QuotaReserved=True: Kueue still counts the Workload's quota."""
    finished: bool = False
    cluster_queue: str | None = None
    reason: str = ""
    """Kueue's reason for the state: the eviction's, the reservation's, or Admitted."""
    message: str = ""
    flavors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Pod set name -> the ResourceFlavors assigned to it (empty unless admitted)."""
    pod_set_updates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Pod set name -> the merged podSetUpdates of the admission checks."""

    @classmethod
    def from_workload(cls, workload: Mapping[str, Any], queue: str) -> AdmissionView:
        meta = workload.get("metadata") or {}
        status = workload.get("status") or {}
        conds = _conditions(workload)
        evicted = _true(conds, WL_EVICTED)
        admitted = _true(conds, WL_ADMITTED) and not evicted
        admission = status.get("admission") or {}
        flavors: dict[str, tuple[str, ...]] = {}
        if admitted:
            for psa in admission.get("podSetAssignments") or []:
                names = dict.fromkeys(str(f) for f in (psa.get("flavors") or {}).values())
                flavors[str(psa.get("name"))] = tuple(names)
        if evicted:
            why = conds[WL_EVICTED]
        elif admitted:
            why = conds[WL_ADMITTED]
        else:
            why = conds.get(WL_QUOTA_RESERVED) or conds.get(WL_ADMITTED) or {}
        return cls(
            workload=str(meta.get("name", "")),
            queue=queue,
            admitted=admitted,
            evicted=evicted,
            reserved=_true(conds, WL_QUOTA_RESERVED) or bool(admission),
            finished=_true(conds, WL_FINISHED),
            cluster_queue=admission.get("clusterQueue") or None,
            reason=str(why.get("reason") or ""),
            message=str(why.get("message") or ""),
            flavors=flavors,
            pod_set_updates=_pod_set_updates(status) if admitted else {},
        )


def _pod_set_updates(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Labels, annotations, node selectors and tolerations the admission checks ask for."""
    out: dict[str, dict[str, Any]] = {}
    for check in status.get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            merged = out.setdefault(
                str(update.get("name")),
                {"labels": {}, "annotations": {}, "nodeSelector": {}, "tolerations": []},
            )
            for key in ("labels", "annotations", "nodeSelector"):
                merged[key].update(update.get(key) or {})
            merged["tolerations"].extend(update.get("tolerations") or [])
    return out
