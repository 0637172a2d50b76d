"""Child processes of the test clusters: each runs in its own process group with its own log
file, is polled until ready (HTTP probes), and is stopped with its whole group. Free loopback
ports come from one allocator per cluster."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from distgnn_operator.local.ports import free_ports
from tests.support.controlplane_errors import ComponentError, ControlPlaneError


@dataclass
class Component:
    """One running control-plane process, in its own process group, logging to a file."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]
    ready_after: float | None = None

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 64 * 1024))
                text = log.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, problem: str) -> ComponentError:
        """The error naming this component, ``problem``, its log and the log's last lines."""
        return ComponentError(self.name, self.log_path, problem, self.log_tail(), self.process)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds."""
        pgid = self.process.pid
        if self.process.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(pgid, signal.SIGKILL)
                self.process.wait(grace)
        # Anything the leader left behind in its group goes too.
        _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def launch(name: str, argv: Sequence[str], log_path: Path) -> Component:
    """Start ``argv`` in a new session with stdout and stderr appended to ``log_path``."""
    argv = [str(a) for a in argv]
    if not os.access(argv[0], os.X_OK):
        raise ComponentError(name, log_path, f"cannot start: {argv[0]} is not an executable")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # setpriv makes the kernel SIGKILL the component if the test process dies abruptly
    # (a SIGTERMed kube-apiserver can hang in graceful shutdown once etcd is gone).
    prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    with log_path.open("ab") as log:
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            [*prefix, *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Component(name, argv, log_path, process)


def wait_ready(component: Component, ready: Callable[[], bool], timeout: float) -> None:
    """Poll ``ready`` until it returns True; raise ComponentError if the process exits
    or ``timeout`` passes (then the process is stopped). Probe exceptions mean 'not yet'."""
    start = time.monotonic()
    last_probe = "no answer yet"
    while True:
        code = component.process.poll()
        if code is not None:
            raise component.failure(f"exited with code {code} while starting")
        try:
            if ready():
                component.ready_after = time.monotonic() - start
                return
        except Exception as exc:
            last_probe = f"{type(exc).__name__}: {exc}"
        if time.monotonic() - start > timeout:
            component.stop()
            raise component.failure(
                f"did not become ready within {timeout:.0f}s (last probe: {last_probe})"
            )
        time.sleep(0.2)


class PortAllocator:
    """Hands out free loopback TCP ports, never the same one twice."""

    def __init__(self) -> None:
        self._taken: set[int] = set()

    def take(self) -> int:
        (port,) = free_ports(1, exclude=self._taken)
        self._taken.add(port)
        return port


def http_get(url: str, context: ssl.SSLContext | None = None, timeout: float = 5.0) -> str:
    """GET ``url``; return the body of a 200 answer, raise with the body otherwise."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as answer:
            return str(answer.read().decode())
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace").strip().splitlines()
        raise ControlPlaneError(f"GET {url}: HTTP {exc.code}: {' | '.join(body[-5:])}") from exc


def insecure_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
