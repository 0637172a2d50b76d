"""One HTTP server per pod on the metrics port: Prometheus ``/metrics`` and ``/progress``.

``/progress`` answers with the JSON of :class:`distgnn_api.spec.Progress`; the operator polls
it on trainer 0. Samplers serve ``/metrics`` only. ``/healthz`` answers ``ok`` for probes.

A trainer pod that runs several training processes (one per GPU) serves from its supervisor
process: the children write metrics in prometheus-client's multiprocess mode and the
progress to a file, and the supervisor serves both (see :func:`multiprocess_registry` and
:func:`progress_from_file`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from distgnn_api.contract import (
    ENV_METRICS_ADDRESS,
    ENV_METRICS_PORT,
    PROGRESS_PATH,
    dump_json,
    rfc3339_now,
)
from distgnn_api.spec import Progress

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"

ProgressSource = Callable[[], Progress | None]


class ProgressTracker:
    """The trainer's current progress; thread-safe, optionally mirrored to a JSON file."""

    def __init__(self, epochs: int, mirror: Path | None = None) -> None:
        self._lock = threading.Lock()
        self._progress = Progress(epoch=0, epochs=epochs, last_update_time=rfc3339_now())
        self._mirror = mirror
        if mirror is not None:
            dump_json(mirror, self._progress)

    def update(self, **fields: Any) -> Progress:
        with self._lock:
            self._progress = self._progress.model_copy(
                update={**fields, "last_update_time": rfc3339_now()}
            )
            if self._mirror is not None:
                dump_json(self._mirror, self._progress)
            return self._progress

    def __call__(self) -> Progress:
        with self._lock:
            return self._progress


def progress_from_file(path: Path) -> ProgressSource:
    """A progress source that reads what a child process mirrored to ``path``."""

    def read() -> Progress | None:
        try:
            return Progress.model_validate_json(path.read_text())
        except (OSError, ValueError):
            return None

    return read


def multiprocess_registry(directory: Path) -> CollectorRegistry:
    """A registry aggregating the metrics that child processes write to ``directory``.

    The children must have ``PROMETHEUS_MULTIPROC_DIR`` set to it before importing
    prometheus_client.
    """
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return registry


class StatusServer:
    """Serves the metrics registry and, when given a source, the progress JSON."""

    def __init__(
        self,
        port: int,
        *,
        progress: ProgressSource | None = None,
        registry: CollectorRegistry = REGISTRY,
        host: str = "",
    ) -> None:
        """``host``: the interface to bind (a role's :data:`ENV_METRICS_ADDRESS`, read by
        :class:`~distgnn_api.contract.WorkloadEnv`); empty binds all (pods: Prometheus
        scrapes the pod IP; ``distgnn run`` sets loopback)."""
        self._progress = progress
        self._registry = registry
        handler = self._handler_class()
        try:
            self._httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as err:
            where = f"{host or 'all interfaces'} ({ENV_METRICS_ADDRESS}) port {port}"
            raise OSError(
                f"cannot serve metrics on {where} ({ENV_METRICS_PORT}): {err}; another "
                f"process holds the port, or {ENV_METRICS_ADDRESS} is not an address of "
                "this machine"
            ) from err
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="status-server", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> StatusServer:
        self._thread.start()
        host = str(self._httpd.server_address[0])
        log.info("serving %s and %s on %s:%d", METRICS_PATH, PROGRESS_PATH, host, self.port)
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == METRICS_PATH:
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(server._registry))
                elif path == PROGRESS_PATH and server._progress is not None:
                    progress = server._progress()
                    if progress is None:
                        self._send(503, "application/json", b'{"error": "no progress yet"}')
                    else:
                        body = progress.model_dump_json(by_alias=True).encode()
                        self._send(200, "application/json", body)
                elif path == HEALTH_PATH:
                    self._send(200, "text/plain", b"ok\n")
                else:
                    self._send(404, "text/plain", b"not found\n")

            def _send(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        return Handler
