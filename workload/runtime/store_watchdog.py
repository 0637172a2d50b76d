"""The watch a non-owner process keeps on the job's rendezvous store.

The store lives in trainer 0 (:mod:`distgnn_workload.runtime.rendezvous`). If trainer 0 goes
away (a failure, a gang restart, or the end of the job), the store goes with it; the watchdog
notices, so that peers blocked on RPC or collectives exit instead of waiting for long timeouts.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from datetime import timedelta

from torch._C._distributed_c10d import TCPStore

from distgnn_workload.runtime.rendezvous import GENERATION_KEY, Group


class StoreWatchdog:
    """Watches the job's store from a non-owner process; calls ``on_lost`` when it goes away.

    The store lives in trainer 0. If trainer 0 exits (failure, or the end of the job), peers
    blocked on RPC or collectives would otherwise wait until long timeouts expire.
    """

    def __init__(
        self,
        group: Group,
        on_lost: Callable[[str], None],
        *,
        interval_s: float = 1.0,
        failures: int = 2,
    ) -> None:
        self._group = group
        self._on_lost = on_lost
        self._interval = interval_s
        self._failures = failures
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-watchdog", daemon=True)

    def start(self) -> StoreWatchdog:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _alive(self) -> bool:
        try:
            with socket.create_connection(
                (self._group.store_host, self._group.store_port), timeout=self._interval
            ):
                return True
        except OSError:
            return False

    def _run(self) -> None:
        try:
            store = TCPStore(
                self._group.store_host,
                self._group.store_port,
                None,
                False,
                timeout=timedelta(seconds=max(2.0, self._interval * 2)),
            )
        except RuntimeError as err:
            if not self._stop.is_set():
                self._on_lost(f"cannot reach the job's store at trainer 0: {err}")
            return
        misses = 0
        while not self._stop.wait(self._interval):
            # A plain connect first: a store client talking to a dead server logs a C++ trace.
            if not self._alive():
                misses += 1
                if misses >= self._failures and not self._stop.is_set():
                    self._on_lost("the job's store at trainer 0 went away")
                    return
                continue
            misses = 0
            try:
                generation = store.get(GENERATION_KEY).decode()
            except RuntimeError as err:
                if not self._stop.is_set():
                    self._on_lost(f"trainer 0 restarted (the store connection broke: {err})")
                return
            if generation != self._group.generation and not self._stop.is_set():
                self._on_lost("trainer 0 restarted (new store generation)")
                return
