"""The controllers' FailedCreate Events, listed in the background, never on a reconcile's path.

A reconcile whose partition Job or StatefulSet is short of pods reads the namespace's
FailedCreate Events (:func:`~.observe.read_children`), which tell why the controller made no
pod (a quota, an admission policy). While many jobs' controllers make their pods at once,
each such reconcile would list the same Events, and wait for the LIST. Instead it takes the
last LIST that :class:`FailedCreates` holds, and so marks the namespace as wanted; one thread
lists every wanted namespace every ``period`` seconds, for as long as a reconcile wanted it
within the last ``keep`` seconds.

A namespace's first reconcile finds no LIST yet (as if no Event had come). Whenever a LIST
holds an Event that the one before did not (a new Event, or one whose count went up), the
thread tells ``on_new`` the namespace and the uids of the objects those Events are about, so
that the operator reconciles their jobs: a FailedCreate shows in its job's status one
``period`` and one LIST after it happened, without waiting for another trigger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from distgnn_operator.reconcile.kube_api import EVENT, KubeApi
from distgnn_operator.status.blockers import FAILED_CREATE

log = logging.getLogger(__name__)

FAILED_CREATE_FIELDS: Mapping[str, str] = {"reason": FAILED_CREATE}
"""The field selector of the LIST."""

NewEvents = Callable[[str, set[str]], None]
"""Told the namespace and the involved objects' uids of Events a LIST brought."""


def _key(event: Mapping[str, Any]) -> tuple[str, str]:
    meta = event.get("metadata") or {}
    return str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))


class FailedCreates:
    """The last LIST of each wanted namespace's FailedCreate Events, kept fresh by a thread
    (:meth:`start`) or by calls of :meth:`refresh`."""

    def __init__(
        self, api: KubeApi, on_new: NewEvents | None = None, period: float = 2.0, keep: float = 30.0
    ) -> None:
        self._api, self._on_new = api, on_new
        self._period, self._keep = period, keep
        self._wake = threading.Condition()
        self._wanted: dict[str, float] = {}
        """Namespace -> when a reconcile last asked for its Events."""
        self._lists: dict[str, list[dict[str, Any]]] = {}
        self._seen: dict[str, set[tuple[str, str]]] = {}
        """Namespace -> (uid, resourceVersion) of each Event of its last LIST."""
        self._unlisted = False
        """A namespace is wanted that has no LIST yet: list now, not after the period."""
        self._listed = float("-inf")
        self._closed = False
        self._thread: threading.Thread | None = None

    def events(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's FailedCreate Events as last listed (none before its first LIST);
        the namespace is listed from now on, for ``keep`` seconds."""
        with self._wake:
            self._wanted[namespace] = time.monotonic()
            if namespace not in self._lists and not self._unlisted:
                self._unlisted = True
                self._wake.notify()
            return list(self._lists.get(namespace, ()))

    def refresh(self) -> None:
        """List every wanted namespace once, and forget those no reconcile wants anymore."""
        now = time.monotonic()
        with self._wake:
            self._listed = now
            self._unlisted = False
            for namespace in [ns for ns, at in self._wanted.items() if now - at > self._keep]:
                del self._wanted[namespace]
                self._lists.pop(namespace, None)
                self._seen.pop(namespace, None)
            namespaces = list(self._wanted)
        for namespace in namespaces:
            try:
                items = self._api.list(EVENT, namespace, {}, FAILED_CREATE_FIELDS)
            except Exception as err:  # the next period lists again, not every reconcile
                log.warning("could not list the FailedCreate Events of %s: %s", namespace, err)
                with self._wake:
                    self._lists.setdefault(namespace, [])
                continue
            with self._wake:
                before = self._seen.get(namespace, set())
                self._lists[namespace] = items
                self._seen[namespace] = {_key(e) for e in items}
            involved = {
                str((e.get("involvedObject") or {}).get("uid", ""))
                for e in items
                if _key(e) not in before
            }
            if involved and self._on_new is not None:
                self._on_new(namespace, involved)

    def start(self) -> None:
        """List in a thread of its own until :meth:`close`."""
        self._thread = threading.Thread(target=self._run, name="failed-creates", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while self._turn():
            try:
                self.refresh()
            except Exception:  # on_new failed: keep listing
                log.exception("listing the FailedCreate Events failed")

    def _turn(self) -> bool:
        """Wait until a LIST is due (a namespace is wanted, and the period passed or one has
        no LIST yet); False once closed."""
        with self._wake:
            while not self._closed:
                due = 0.0 if self._unlisted else self._listed + self._period - time.monotonic()
                if self._wanted and due <= 0:
                    return True
                self._wake.wait(due if self._wanted else None)
            return False
