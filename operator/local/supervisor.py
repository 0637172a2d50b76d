"""Runs local processes, keeps their logs, relays their progress lines, and stops them.

Each process leads its own process group, so that stopping it also stops whatever it
started (data-loader workers, RPC threads' helpers) and so that the terminal's Ctrl-C
reaches only ``distgnn run``, which then stops every child in order: SIGTERM to each
group, then SIGKILL to the groups still alive after a grace period.

With ``preload=True`` (``distgnn run --preload``), a ``python -m`` process that uses no GPU
is forked from a zygote that imported torch once (:mod:`distgnn_operator.local.zygote`)
instead of starting a fresh interpreter: the same process, seconds of CPU sooner, but
``/proc`` (``ps``) shows the zygote's command line and environment for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from distgnn_api.contract import SETTINGS_PREFIX, ProgressEvent, parse_progress_line
from distgnn_operator.local.launch_plan import ProcessSpec
from distgnn_operator.local.zygote import Zygote, ZygoteChild

DEFAULT_GRACE_PERIOD_S = 10.0
_POLL_S = 0.05


@dataclass(frozen=True)
class Exited:
    """A process ended; ``at`` is the monotonic time its parent saw it."""

    spec: ProcessSpec
    returncode: int
    at: float


@dataclass(frozen=True)
class Progressed:
    """A process printed a progress line."""

    spec: ProcessSpec
    event: ProgressEvent


Notice = Exited | Progressed


Process: TypeAlias = "subprocess.Popen[bytes] | ZygoteChild"


@dataclass
class _Child:
    spec: ProcessSpec
    proc: Process
    reader: threading.Thread
    waiter: threading.Thread
    returncode: int | None = None


PROCESS_TABLE = "processes.json"
"""The file in a run's directory that lists every process ``distgnn run`` started."""


@dataclass(frozen=True)
class TableEntry:
    """One process of a run's process table (:data:`PROCESS_TABLE`)."""

    name: str
    pid: int
    """Also its process group's id."""
    env: dict[str, str]
    """Its ``DISTGNN_*`` settings (role, rank, ports ...), not the rest of its environment."""
    exit_code: int | None
    """None while it runs (or until its exit was seen)."""


def read_process_table(run_dir: Path) -> dict[str, TableEntry]:
    """The process table of the run in ``run_dir``, by process name: empty until the run
    wrote it. The supervisor replaces the file atomically, so it is never read half written."""
    path = run_dir / PROCESS_TABLE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise ValueError(f"{path}: not a process table ({err})") from err
    return {
        name: TableEntry(
            name=name,
            pid=int(entry["pid"]),
            env={str(k): str(v) for k, v in entry["env"].items()},
            exit_code=None if entry["exitCode"] is None else int(entry["exitCode"]),
        )
        for name, entry in raw.items()
    }


class Supervisor:
    """Starts processes and reports their exits and progress lines, in the order they happen.

    ``preload``: fork ``python -m`` CPU processes from a zygote of its own (stopped with the
    supervisor); ``zygote``: from that zygote instead, which the caller owns and stops.
    ``table``: a JSON file kept up to date with every process started: its name, pid (also its
    process group), its ``DISTGNN_*`` environment (role, rank, ports) and, once it ended, its
    exit code (:func:`read_process_table` reads it). It tells tools (``py-spy``, a scraper)
    which process is which also where ``/proc`` shows the zygote's environment for a forked
    one.
    """

    def __init__(
        self,
        grace_period_s: float = DEFAULT_GRACE_PERIOD_S,
        *,
        preload: bool = False,
        zygote: Zygote | None = None,
        table: Path | None = None,
    ) -> None:
        self.grace_period_s = grace_period_s
        self._own_zygote = zygote is None and preload
        self._zygote = zygote if zygote is not None else (Zygote() if preload else None)
        self.notices: queue.Queue[Notice] = queue.Queue()
        self._children: dict[str, _Child] = {}
        self._kill_now = threading.Event()
        self._table = table
        self._table_lock = threading.Lock()
        self._entries: dict[str, dict[str, object]] = {}

    def start(self, spec: ProcessSpec) -> None:
        """Start one process in its own process group; its stdout and stderr go to its log.

        A name may start again once its process exited (a restarted pod); its log grows."""
        old = self._children.get(spec.name)
        if old is not None and old.proc.poll() is None:
            raise RuntimeError(f"{spec.name} is still running (pid {old.proc.pid})")
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        spec.cwd.mkdir(parents=True, exist_ok=True)
        proc: Process
        if self._zygote is not None and self._zygote.serves(spec.argv, spec.env):
            proc = self._zygote.start(spec.argv, spec.env, spec.cwd)
        else:
            proc = subprocess.Popen(
                list(spec.argv),
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        reader = threading.Thread(
            target=self._read, args=(spec, proc), name=f"log-{spec.name}", daemon=True
        )
        waiter = threading.Thread(
            target=self._wait, args=(spec, proc), name=f"wait-{spec.name}", daemon=True
        )
        self._children[spec.name] = _Child(spec, proc, reader, waiter)
        self._write_table(
            spec.name,
            {
                "pid": proc.pid,
                "env": {k: v for k, v in spec.env.items() if k.startswith(SETTINGS_PREFIX)},
                "exitCode": None,
            },
        )
        reader.start()
        waiter.start()

    def _write_table(self, name: str, entry: dict[str, object]) -> None:
        """Record a process in the table (atomically: a reader sees the old or the new file)."""
        if self._table is None:
            return
        with self._table_lock:
            self._entries[name] = {**self._entries.get(name, {}), **entry}
            self._table.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._table.with_name(f".{self._table.name}.tmp")
            tmp.write_text(json.dumps(self._entries, indent=2, sort_keys=True))
            tmp.replace(self._table)

    def _read(self, spec: ProcessSpec, proc: Process) -> None:
        assert proc.stdout is not None
        with open(spec.log_path, "ab") as log:
            for raw in proc.stdout:
                log.write(raw)
                log.flush()
                event = parse_progress_line(raw.decode(errors="replace").rstrip("\r\n"))
                if event is not None:
                    self.notices.put(Progressed(spec, event))

    def _wait(self, spec: ProcessSpec, proc: Process) -> None:
        returncode = proc.wait()
        # Post the process's last progress lines before its exit (unless a leftover
        # grandchild keeps the pipe open).
        self._children[spec.name].reader.join(timeout=2)
        self._write_table(spec.name, {"exitCode": returncode})
        self.notices.put(Exited(spec, returncode, time.monotonic()))

    def record_exit(self, notice: Exited) -> None:
        """Note an exit taken from the queue (the runner reads the queue)."""
        self._children[notice.spec.name].returncode = notice.returncode

    def running(self) -> list[ProcessSpec]:
        """Processes whose exit has not been seen yet."""
        return [c.spec for c in self._children.values() if c.proc.poll() is None]

    def pids(self) -> list[int]:
        """Process (and process group) ids of every process started."""
        return [c.proc.pid for c in self._children.values()]

    def poll(self, name: str) -> int | None:
        """A process's exit code (negative: the signal that ended it), None while it runs."""
        return self._child(name).proc.poll()

    def wait(self, name: str, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for a process to exit; its exit code, or None."""
        try:
            return self._child(name).proc.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return None

    def signal(self, name: str, sig: signal.Signals) -> None:
        """Send a signal to one process and everything it started (its process group), as
        a node losing a pod (SIGKILL) or a stuck pod (SIGSTOP) would."""
        _signal_group(self._child(name).proc.pid, sig)

    def pid(self, name: str) -> int:
        """A process's id (also its process group's)."""
        return self._child(name).proc.pid

    def _child(self, name: str) -> _Child:
        if name not in self._children:
            raise KeyError(f"no process {name!r} was started; started: {sorted(self._children)}")
        return self._children[name]

    def kill_now(self) -> None:
        """Cut short a stop in progress: SIGKILL at once (a second Ctrl-C)."""
        self._kill_now.set()

    def stop(self, names: Iterable[str] | None = None) -> None:
        """Stop processes and everything they started: SIGTERM, a grace period, SIGKILL.

        Without names, every process: also the groups of those that exited cleanly, so that
        nothing they left behind survives the run.
        """
        chosen = [c for c in self._children.values() if names is None or c.spec.name in set(names)]
        for child in chosen:
            _signal_group(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_period_s
        while time.monotonic() < deadline and not self._kill_now.is_set():
            if all(c.proc.poll() is not None and not _group_alive(c.proc.pid) for c in chosen):
                break
            time.sleep(_POLL_S)
        for child in chosen:
            # The group may outlive its leader; kill whatever is left of it.
            _signal_group(child.proc.pid, signal.SIGKILL)
        for child in chosen:
            child.proc.wait()
            child.reader.join(timeout=5)
            child.waiter.join(timeout=5)
        if names is None and self._zygote is not None and self._own_zygote:
            self._zygote.close()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def log_tail(path: Path, lines: int = 30) -> list[str]:
    """The last lines of a log, without progress lines (they are drawn, not read)."""
    if not path.exists():
        return []
    keep: deque[str] = deque(maxlen=lines)
    with open(path, errors="replace") as f:
        for line in f:
            if parse_progress_line(line.rstrip("\n")) is None:
                keep.append(line.rstrip("\n"))
    return list(keep)
