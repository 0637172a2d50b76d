"""A KubeApi that forwards every call to the KubeApi it wraps, for the layers a reconcile
writes and reads through (:class:`~.event_queue.QueuedEvents`, :class:`~.watched.WatchedReads`,
:class:`~.call_trace.CallTrace`): each overrides what it does differently.

Every call goes through :meth:`ForwardingApi._forward` with its verb, kind and object name,
so a layer that treats all calls alike (timing them, noting what they return) overrides that
one method; a layer that changes one call overrides that method, with KubeApi's signature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from distgnn_operator.reconcile.kube_api import Kind, KubeApi, kind_of

T = TypeVar("T")


def _target(verb: str, args: tuple[Any, ...]) -> tuple[Kind, str]:
    """The kind and the object's name of a call: ``(kind, namespace, name, ...)``, or a
    manifest or an object read first (create, apply, replace_status); a list names no object."""
    first = args[0]
    if isinstance(first, Kind):
        return first, str(args[2]) if verb != "list" else ""
    obj: Mapping[str, Any] = first
    return kind_of(obj), str((obj.get("metadata") or {}).get("name", ""))


def _forwarding(verb: str) -> Any:
    """A method that sends the KubeApi call ``verb`` through :meth:`ForwardingApi._forward`."""

    def method(self: ForwardingApi, *args: Any, **kwargs: Any) -> Any:
        kind, name = _target(verb, args)
        return self._forward(verb, kind, name, lambda api: getattr(api, verb)(*args, **kwargs))

    method.__name__ = method.__qualname__ = verb
    method.__doc__ = f"KubeApi.{verb}, sent to the wrapped api."
    return method


class ForwardingApi:
    """A KubeApi that sends each call to ``api``."""

    def __init__(self, api: KubeApi) -> None:
        self._api = api

    def _forward(self, verb: str, kind: Kind, name: str, call: Callable[[KubeApi], T]) -> T:
        """Send one call (``verb``: the KubeApi method's name) to the wrapped api."""
        return call(self._api)

    get = _forwarding("get")
    list = _forwarding("list")
    create = _forwarding("create")
    patch = _forwarding("patch")
    replace_status = _forwarding("replace_status")
    apply = _forwarding("apply")
    delete = _forwarding("delete")
