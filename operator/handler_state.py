"""What the kopf handlers share (:mod:`distgnn_operator.handlers`): the reconciler's API
client, the indexes' keys and their slim entries, the per-job slots that serialise
reconciles, and the :class:`Runtime` kept on kopf's memo (settings, API client, pools,
indexes, the Events' queue, the FailedCreate Events' thread)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes.client import ApiClient

from distgnn_operator import metrics, naming
from distgnn_operator.connection import load_configuration
from distgnn_operator.constants import LABEL_JOB
from distgnn_operator.reconcile import KubeApi, ReconcileOptions, RestKubeApi
from distgnn_operator.reconcile.event_queue import EventQueue
from distgnn_operator.reconcile.failed_creates import FailedCreates
from distgnn_operator.reconcile.kube_api import DISTGNNJOB, JOB, PVC, STATEFULSET, Kind
from distgnn_operator.reconcile.slim import slim
from distgnn_operator.reconcile.watched import (
    CACHED_KINDS,
    LatestSeen,
    WatchedChildren,
)
from distgnn_operator.settings import OperatorSettings

WRITES_PER_STAGE = 4
"""Writes one reconcile sends together at most (a Service, two StatefulSets, the claim's
partition marker; a gang restart's pod deletions may be more, and wait for a thread)."""


def make_api(settings: OperatorSettings) -> KubeApi:
    """The reconciler's API client, with a connection for every request that may be in
    flight at once (each worker's stage of writes, the Events' thread and the FailedCreate
    Events' thread)."""
    cfg = load_configuration(settings)
    cfg.connection_pool_maxsize = max(
        cfg.connection_pool_maxsize, settings.workers * WRITES_PER_STAGE + 2
    )
    return RestKubeApi(ApiClient(cfg), observe=metrics.count_api_request)


IndexKey = tuple[str, str]
"""(namespace, job name)."""


def index_id(kind: Kind) -> str:
    """The id of a watched kind's index (also the kwarg kopf passes it to handlers as)."""
    return f"watched_{kind.plural}"


def indexer(kind: Kind) -> Callable[..., dict[IndexKey, dict[str, Any]]]:
    def index(
        *, namespace: str | None, labels: Mapping[str, str], body: kopf.Body, **_: Any
    ) -> dict[IndexKey, dict[str, Any]]:
        return {(namespace or "", labels[LABEL_JOB]): slim(kind, body)}

    index.__doc__ = f"Index the {kind.plural} labelled with a job by (namespace, job)."
    return index


def named_indexer(kind: Kind) -> Callable[..., dict[IndexKey, dict[str, Any]]]:
    def index(
        *, namespace: str | None, name: str, body: kopf.Body, **_: Any
    ) -> dict[IndexKey, dict[str, Any]]:
        return {(namespace or "", name): slim(kind, body)}

    index.__doc__ = f"Index the {kind.plural} by (namespace, name)."
    return index


def claim_of(name: str, job: Mapping[str, Any]) -> str:
    """The claim a job's raw spec names (a spec the models reject still names one)."""
    storage = (job.get("spec") or {}).get("storage") or {}
    named = storage.get("claimName") if isinstance(storage, Mapping) else None
    return named if isinstance(named, str) and named else naming.pvc_name(name)


@dataclass
class Slot:
    """Serialises the reconciles of one job and merges the triggers that wait."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: bool = False
    poll: bool = False
    changed: bool = False
    """A trigger other than the timer is among those merged (a child or the job changed)."""
    last_poll: float | None = None
    """When the timer last reconciled the job (time.monotonic())."""


@dataclass
class Runtime:
    """What the handlers share, kept on kopf's memo."""

    settings: OperatorSettings
    api: KubeApi
    executor: ThreadPoolExecutor
    options: ReconcileOptions
    posting: EventQueue
    """The Events the reconciles record, posted by a thread of their own."""
    writers: ThreadPoolExecutor
    """Threads that send a reconcile's independent writes together (ReconcileOptions.fanout)."""
    indexes: Mapping[Kind, kopf.Index[IndexKey, dict[str, Any]]] = field(default_factory=dict)
    latest: LatestSeen = field(default_factory=LatestSeen)
    events: FailedCreates | None = None
    """The FailedCreate Events the reconciles read, listed by a thread of their own."""
    tasks: set[asyncio.Future[None]] = field(default_factory=set)
    """Reconciles started without a kopf handler (after new FailedCreate Events), kept until
    they finish."""
    slots: dict[tuple[str, str], Slot] = field(default_factory=dict)
    closing: bool = False
    """The operator is stopping: its pools are shut down, so triggers reconcile nothing."""
    polls: asyncio.Semaphore | None = None
    """Reconciles that only the timer asked for may use half the workers: a change is
    never queued behind every job's periodic poll."""

    def watched(self, namespace: str, name: str) -> WatchedChildren:
        """A snapshot of the job's children in the indexes (taken in the event loop, which
        is the only writer of the indexes)."""
        key = (namespace, name)
        children = [
            (kind, obj)
            for kind, index in self.indexes.items()
            if kind not in CACHED_KINDS
            for obj in index.get(key, ())
        ]
        cached: list[tuple[Kind, dict[str, Any]]] = []
        jobs, claims = self.indexes.get(DISTGNNJOB), self.indexes.get(PVC)
        for job in jobs.get(key, ()) if jobs is not None else ():
            cached.append((DISTGNNJOB, job))
            claim = (namespace, claim_of(name, job))
            cached += [(PVC, obj) for obj in claims.get(claim, ())] if claims is not None else []
        return WatchedChildren.of(namespace, name, children, cached)

    def jobs_owning(self, namespace: str, uids: set[str]) -> list[str]:
        """The jobs in a namespace whose partition Job or a StatefulSet has one of the uids
        (in the event loop, which is the only writer of the indexes)."""
        found: set[str] = set()
        for kind in (JOB, STATEFULSET):
            index = self.indexes.get(kind)
            if index is None:
                continue
            for (ns, job), objects in index.items():
                if ns == namespace and any(
                    (obj.get("metadata") or {}).get("uid") in uids for obj in objects
                ):
                    found.add(job)
        return sorted(found)

    def poll_due(self, slot: Slot) -> bool:
        """Whether a timer tick of the slot's job reconciles it: each job's polls are
        spread so that all jobs together ask for at most ``poll_rate`` a second."""
        now = time.monotonic()
        spacing = max(
            self.settings.progress_poll_interval, len(self.slots) / self.settings.poll_rate
        )
        # A tick a little early (kopf's timers drift) still counts as due.
        if slot.last_poll is not None and now - slot.last_poll < 0.9 * spacing:
            return False
        slot.last_poll = now
        return True
