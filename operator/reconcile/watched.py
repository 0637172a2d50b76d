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
another reconcile. The snapshot's objects are the watch's own and are never modified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distgnn_operator.constants import LABEL_JOB
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    JOB,
    NETWORK_POLICY,
    POD,
    SERVICE,
    STATEFULSET,
    ApiError,
    Kind,
    KubeApi,
    kind_of,
)

WATCHED_KINDS: tuple[Kind, ...] = (POD, STATEFULSET, JOB, CONFIG_MAP, SERVICE, NETWORK_POLICY)
"""The kinds whose objects labelled with a job the handlers index."""


@dataclass(frozen=True)
class WatchedChildren:
    """The objects labelled with one job, as the watches last saw them."""

    namespace: str
    job: str
    objects: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """(plural, name) -> object, for every watched kind."""

    @classmethod
    def of(
        cls, namespace: str, job: str, objects: Sequence[tuple[Kind, Mapping[str, Any]]]
    ) -> WatchedChildren:
        """A snapshot from (kind, object) pairs."""
        return cls(
            namespace=namespace,
            job=job,
            objects={(kind.plural, str(obj["metadata"]["name"])): obj for kind, obj in objects},
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


class WatchedReads:
    """A KubeApi that answers the reads of one job's children from a watch snapshot."""

    def __init__(self, api: KubeApi, watched: WatchedChildren) -> None:
        self._api = api
        self._watched = watched
        self._exist: set[tuple[str, str]] = set()
        """(plural, name) of objects the API server said exist when the snapshot lacked them."""

    def _covers(self, kind: Kind, namespace: str) -> bool:
        return namespace == self._watched.namespace and kind in WATCHED_KINDS

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        if self._covers(kind, namespace) and (kind.plural, name) not in self._exist:
            return self._watched.get(kind, name)
        return self._api.get(kind, namespace, name)

    def list(
        self,
        kind: Kind,
        namespace: str,
        labels: Mapping[str, str],
        fields: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        if (
            self._covers(kind, namespace)
            and not fields
            and dict(labels) == {LABEL_JOB: self._watched.job}
        ):
            return self._watched.items(kind)
        return self._api.list(kind, namespace, labels, fields)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return self._api.create(obj)
        except ApiError as err:
            if err.already_exists:
                self._exist.add((kind_of(obj).plural, str(obj["metadata"]["name"])))
            raise

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self._api.patch(kind, namespace, name, body, subresource=subresource)

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        try:
            return self._api.apply(obj, force=force)
        except ApiError as err:
            if err.conflict:
                self._exist.add((kind_of(obj).plural, str(obj["metadata"]["name"])))
            raise

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        return self._api.delete(kind, namespace, name, uid=uid)
