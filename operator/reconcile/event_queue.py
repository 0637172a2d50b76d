"""The operator's Events, posted off the reconciles' path.

An Event explains a transition the status already shows; a reconcile that waited for each
Event's POST would make every transition slower by a request per Event. The reconcile
threads put the Events' manifests, made at the moment of the transition, on a bounded
queue (:class:`EventQueue`), and one thread posts them in order. While the queue is full, the
reconcile posts its Event itself, so none is dropped; at shutdown the queue is drained.
Losing an Event never fails a reconcile: a POST that fails is logged.

:class:`QueuedEvents` is the KubeApi a reconcile writes through: it puts a create of an Event
on the queue and sends every other request as it comes.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any

from distgnn_operator.reconcile.forwarding import ForwardingApi
from distgnn_operator.reconcile.kube_api import EVENT, KubeApi, kind_of

log = logging.getLogger(__name__)

_STOP = object()


class EventQueue:
    """Events posted in order by one background thread."""

    def __init__(self, api: KubeApi, limit: int = 1000) -> None:
        self._api = api
        self._queue: queue.Queue[object] = queue.Queue(maxsize=limit)
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def put(self, event: Mapping[str, Any]) -> None:
        """Queue an Event; while the queue is full, post it now."""
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._post(event)

    def close(self, timeout: float = 10.0) -> None:
        """Post what is queued (for ``timeout`` seconds at most) and stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("%d Events were not posted before the shutdown", self._queue.qsize())

    def join(self) -> None:
        """Wait until every queued Event is posted."""
        self._queue.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                assert isinstance(item, Mapping)
                self._post(item)
            finally:
                self._queue.task_done()

    def _post(self, event: Mapping[str, Any]) -> None:
        try:
            self._api.create(event)
        except Exception as err:
            involved = event.get("involvedObject") or {}
            log.warning(
                "could not post event %s on %s: %s", event.get("reason"), involved.get("name"), err
            )


class QueuedEvents(ForwardingApi):
    """A KubeApi that queues the creates of Events and sends everything else."""

    def __init__(self, api: KubeApi, events: EventQueue) -> None:
        super().__init__(api)
        self._events = events

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if kind_of(obj) != EVENT:
            created: dict[str, Any] = super().create(obj)
            return created
        self._events.put(obj)
        return dict(obj)
