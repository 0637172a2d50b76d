"""A KubeApi that forwards every call to the KubeApi it wraps, for the layers a reconcile
writes and reads through (:class:`~.event_queue.QueuedEvents`, :class:`~.watched.WatchedReads`,
:class:`~.call_trace.CallTrace`): each overrides what it does differently.

Every call goes through :meth:`ForwardingApi._forward` with its verb, kind and object name,
so a layer that treats all calls alike (timing them, noting what they return) overrides that
one method.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from distgnn_operator.reconcile.kube_api import Kind, KubeApi, kind_of

T = TypeVar("T")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class ForwardingApi:
    """A KubeApi that sends each call to ``api``."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api

    def _forward(self, verb: str, kind: Kind, name: str, call: Callable[[KubeApi], T]) -> T:
        """Send one call (``verb`` as RestKubeApi counts it) to the wrapped api."""
        return call(self._api)

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self._forward("get", kind, name, lambda api: api.get(kind, namespace, name))

    def list(
        self,
        kind: Kind,
        namespace: str,
        labels: Mapping[str, str],
        fields: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        return self._forward(
            "list", kind, "", lambda api: api.list(kind, namespace, labels, fields)
        )

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self._forward("create", kind_of(obj), _name(obj), lambda api: api.create(obj))

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return self._forward(
            "patch",
            kind,
            name,
            lambda api: api.patch(kind, namespace, name, body, subresource=subresource),
        )

    def replace_status(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        status: Mapping[str, Any],
        *,
        expected: Mapping[str, Any] | None,
        resource_version: str,
    ) -> dict[str, Any]:
        return self._forward(
            "replace_status",
            kind,
            name,
            lambda api: api.replace_status(
                kind, namespace, name, status, expected=expected, resource_version=resource_version
            ),
        )

    def apply(self, obj: Mapping[str, Any], *, force: bool = True) -> dict[str, Any]:
        return self._forward(
            "apply", kind_of(obj), _name(obj), lambda api: api.apply(obj, force=force)
        )

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str | None = None) -> bool:
        return self._forward(
            "delete", kind, name, lambda api: api.delete(kind, namespace, name, uid=uid)
        )
