"""Reads of a job's children answered from the operator's watches instead of the API server.

The handlers keep in-memory indexes of the objects labelled with a job (pods, StatefulSets,
Jobs, ConfigMaps, Services, NetworkPolicies), fed by kopf's watches. Before each reconcile
they take a :class:`WatchedChildren` snapshot of one job's entries, and the reconcile reads
through :class:`WatchedReads`:

- a GET of a child is answered from the snapshot: the object, or None when the snapshot
  lacks it;
- the LIST of the job's pods by its label is answered from the snapshot (the index holds every
  pod with that label);
- writes, and every other read, go to the API server.

A child the snapshot lacks may still exist: the watch has not shown it yet, or it is an
object without the job's label (someone else's, or an orphan to adopt). The reconcile
creates a missing child with a create or an unforced server-side apply, so the API server
answers AlreadyExists or a conflict for someone else's object; from then on this reader
asks the API server for that name, and the reconcile adopts the object or reports its owner
as it would after a GET.

A snapshot may lag the API server by a watch event, as any informer's cache does; every
action of the reconcile is idempotent, and the change that the watch brings next triggers
another reconcile. The snapshot's objects are the watch's own and are never modified. A
child a reconcile wrote (created, applied, patched) counts as the API server returned it
until the watch shows it as new, for ``child_ttl`` seconds at most (:class:`LatestSeen`, as
a controller's expectations do): the reconcile that the watch events of its siblings trigger
next neither creates it again nor applies it again.

The job itself and its claim (a shared claim carries no job label) are in the snapshot too,
from indexes of every DistGNNJob and every claim, but their absence means "ask the API
server" (a claim the watch has not shown yet, a claim that does not exist). Both are read
for more than their children's facts: the job's resourceVersion guards the status write,
and the status it holds is the previous status every decision starts from, so a stale one
must never pass for current. :class:`LatestSeen` keeps the job and the claim as the
reconciler last received them from the API server (a status write returns the job after
it); a snapshot takes whichever of that and the watch's object is newer (resourceVersions
compared as the etcd revisions they are; where one is not a number the API server is asked).
A write that conflicts anyway (someone else's change the watch has not shown yet) makes the
retry read both from the API server (:meth:`WatchedReads.refresh`).

The controllers' FailedCreate Events, listed while a controller is short of pods, are the
last LIST of a background thread (:class:`~.failed_creates.FailedCreates`): no reconcile waits
for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distgnn_operator.constants import LABEL_JOB
from distgnn_operator.reconcile.failed_creates import FAILED_CREATE_FIELDS, FailedCreates
from distgnn_operator.reconcile.forwarding import ForwardingApi, T
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    DISTGNNJOB,
    EVENT,
    JOB,
    NETWORK_POLICY,
    POD,
    PVC,
    SERVICE,
    STATEFULSET,
    ApiError,
    Kind,
    KubeApi,
    Object,
    Selector,
)
from distgnn_operator.reconcile.slim import slim

WATCHED_KINDS: tuple[Kind, ...] = (POD, STATEFULSET, JOB, CONFIG_MAP, SERVICE, NETWORK_POLICY)
"""The kinds whose objects labelled with a job the handlers index."""

_KEPT_VERBS = frozenset({"get", "create", "patch", "replace_status", "apply"})
"""The calls whose answer is the object as the API server holds it now."""

CACHED_KINDS: tuple[Kind, ...] = (DISTGNNJOB, PVC)
"""The kinds the handlers index by name; a snapshot lacking one of their objects asks the API
server for it."""

ObjectKey = tuple[str, str, str]
"""(plural, namespace, name)."""


def newer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether ``a`` is a later version of the same object than ``b``; None when their
    resourceVersions are not numbers (then the API server decides)."""
    ra = str((a.get("metadata") or {}).get("resourceVersion", ""))
    rb = str((b.get("metadata") or {}).get("resourceVersion", ""))
    if not (ra.isdigit() and rb.isdigit()):
        return None
    return int(ra) > int(rb)


class LatestSeen:
    """The objects as the reconcile threads last received them from the API server, until
    the watch shows them as new (shared by the threads): the DistGNNJobs and claims, and
    for ``child_ttl`` seconds the children a reconcile wrote (each kept slim, as the
    indexes keep it)."""

    def __init__(
        self, child_ttl: float = 15.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._lock = threading.Lock()
        self._objects: dict[ObjectKey, Mapping[str, Any]] = {}
        self._written: dict[ObjectKey, float] = {}
        """When each child was kept (the job and the claim never expire)."""
        self._child_ttl = child_ttl
        self._clock = clock
        self._swept = clock()

    def __len__(self) -> int:
        return len(self._objects)

    def holds(self, kind: Kind, namespace: str, name: str) -> bool:
        """Whether an object is kept."""
        with self._lock:
            return (kind.plural, namespace, name) in self._objects

    def note(self, kind: Kind, obj: Mapping[str, Any] | None) -> None:
        """Keep an object the API server returned, when it is newer than the one kept."""
        if obj is None or kind not in (*CACHED_KINDS, *WATCHED_KINDS):
            return
        meta = obj.get("metadata") or {}
        key = (kind.plural, str(meta.get("namespace", "")), str(meta.get("name", "")))
        now = self._clock()
        with self._lock:
            kept = self._objects.get(key)
            if kept is None or newer(obj, kept) is not False:
                self._objects[key] = slim(kind, obj) if kind in WATCHED_KINDS else obj
                if kind in WATCHED_KINDS:
                    self._written[key] = now
            if now - self._swept > self._child_ttl:
                self._sweep(now)

    def _sweep(self, now: float) -> None:
        """Forget the children kept past their time (those of a deleted job, say)."""
        self._swept = now
        for key in [k for k, at in self._written.items() if now - at > self._child_ttl]:
            self._objects.pop(key, None)
            del self._written[key]

    def forget(self, kind: Kind, namespace: str, name: str) -> None:
        with self._lock:
            self._objects.pop((kind.plural, namespace, name), None)
            self._written.pop((kind.plural, namespace, name), None)

    def pick(
        self, kind: Kind, namespace: str, name: str, watched: Mapping[str, Any] | None
    ) -> Mapping[str, Any] | None:
        """The newer of the watch's object and the one kept. Where the watch lacks the
        object, or the versions cannot be compared, a job or a claim is None (ask the API
        server), and a child is the one kept while it is young enough (the watch has not
        shown it yet), else None."""
        key = (kind.plural, namespace, name)
        with self._lock:
            kept = self._objects.get(key)
            child = key in self._written
            if child and self._clock() - self._written[key] > self._child_ttl:
                kept = None
                self._drop(key)
            if watched is None:
                if child and kept is not None:
                    return kept
                self._drop(key)
                return None
            if kept is None:
                return watched
            later = newer(kept, watched)
            if later is None:
                return watched if child else None
            if not later:  # the watch caught up
                self._drop(key)
                return watched
            return kept

    def _drop(self, key: ObjectKey) -> None:
        self._objects.pop(key, None)
        self._written.pop(key, None)


@dataclass(frozen=True)
class WatchedChildren:
    """The objects labelled with one job, as the watches last saw them."""

    namespace: str
    job: str
    objects: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(plural, name) -> object, for every watched kind."""
    cached: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(plural, name) -> object of CACHED_KINDS: the job and its claim, when known."""

    @classmethod
    def of(
        cls,
        namespace: str,
        job: str,
        objects: Sequence[tuple[Kind, Mapping[str, Any]]],
        cached: Sequence[tuple[Kind, Mapping[str, Any]]] = (),
    ) -> WatchedChildren:
        """A snapshot from (kind, object) pairs."""
        return cls(
            namespace=namespace,
            job=job,
            objects={(kind.plural, str(obj["metadata"]["name"])): obj for kind, obj in objects},
            cached={(kind.plural, str(obj["metadata"]["name"])): obj for kind, obj in cached},
        )

    def get(self, kind: Kind, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind.plural, name))
        return dict(obj) if obj is not None else None

    def items(self, kind: Kind) -> list[dict[str, Any]]:
        return [
            dict(obj)
            for (plural, _), obj in sorted(self.objects.items(), key=lambda kv: kv[0])
            if plural == kind.plural
        ]


class WatchedReads(ForwardingApi):
    """A KubeApi that answers the reads of one job's children from a watch snapshot."""

    def __init__(
        self,
        api: KubeApi,
        watched: WatchedChildren,
        latest: LatestSeen | None = None,
        events: FailedCreates | None = None,
    ) -> None:
        super().__init__(api)
        self._watched = watched
        self._latest = latest
        """Without it, the job and the claim are read from the API server."""
        self._events = events
        """Without it, every LIST of FailedCreate Events goes to the API server."""
        self._exist: set[tuple[str, str]] = set()
        """(plural, name) of objects the API server said exist when the snapshot lacked them."""

    def _covers(self, kind: Kind, namespace: str) -> bool:
        return namespace == self._watched.namespace and kind in WATCHED_KINDS

    def refresh(self) -> None:
        """Read the job and the claim from the API server from now on (a write conflicted)."""
        self._latest = None

    def _cached(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        if self._latest is None or namespace != self._watched.namespace:
            return None
        watched = self._watched.cached.get((kind.plural, name))
        found = self._latest.pick(kind, namespace, name, watched)
        return dict(found) if found is not None else None

    def _forward(self, verb: str, kind: Kind, name: str, call: Callable[[KubeApi], T]) -> T:
        """Send a call to the API server: keep what a GET or a write returns (LatestSeen),
        and remember a name that AlreadyExists (a create) or conflicts (an unforced apply)."""
        try:
            answer = super()._forward(verb, kind, name, call)
        except ApiError as err:
            if (verb == "create" and err.already_exists) or (verb == "apply" and err.conflict):
                self._exist.add((kind.plural, name))
            raise
        if self._latest is not None and verb in _KEPT_VERBS and isinstance(answer, Mapping):
            self._latest.note(kind, answer)
        return answer

    def get(self, kind: Kind, namespace: str, name: str) -> Object | None:
        if self._covers(kind, namespace) and (kind.plural, name) not in self._exist:
            watched = self._watched.get(kind, name)
            if self._latest is None:
                return watched
            found = self._latest.pick(kind, namespace, name, watched)
            return dict(found) if found is not None else None
        if kind in CACHED_KINDS:
            found = self._cached(kind, namespace, name)
            if found is not None:
                return found
        read: dict[str, Any] | None = super().get(kind, namespace, name)
        return read

    def list(
        self, kind: Kind, namespace: str, labels: Selector, fields: Selector | None = None
    ) -> list[Object]:
        if (
            self._covers(kind, namespace)
            and not fields
            and dict(labels) == {LABEL_JOB: self._watched.job}
        ):
            return self._watched.items(kind)
        if (
            kind == EVENT
            and self._events is not None
            and not labels
            and dict(fields or {}) == FAILED_CREATE_FIELDS
        ):
            return self._events.events(namespace)
        items: list[dict[str, Any]] = super().list(kind, namespace, labels, fields)
        return items

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        if self._latest is not None:
            self._latest.forget(kind, namespace, name)
        deleted: bool = super().delete(kind, namespace, name, uid=uid)
        return deleted
