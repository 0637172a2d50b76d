"""What the processes of a run do: each GPU's utilisation and contexts (``nvidia-smi``),
and the stacks of processes that hang.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from distgnn_operator.local.supervisor import Supervisor


class GpuMonitor:
    """Samples ``nvidia-smi`` while a run lasts: each GPU's utilisation (share of time a
    kernel ran) and which process holds a context on which GPU (a stray context on a
    peer's GPU makes the two processes time-slice that GPU)."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.util: dict[int, list[int]] = {}
        self.contexts: dict[int, set[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._uuids = dict(self._query("--query-gpu=uuid,index"))

    @staticmethod
    def _query(what: str) -> list[tuple[str, str]]:
        try:
            out = subprocess.run(
                ["nvidia-smi", what, "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line]
        return [(r[0], r[1]) for r in rows if len(r) >= 2]

    def start(self) -> GpuMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for index, util in self._query("--query-gpu=index,utilization.gpu"):
                if util.isdigit():
                    self.util.setdefault(int(index), []).append(int(util))
            for pid, gpu in self._query("--query-compute-apps=pid,gpu_uuid"):
                if pid.isdigit() and gpu in self._uuids:
                    self.contexts.setdefault(int(pid), set()).add(int(self._uuids[gpu]))

    def summary(self, pids: dict[int, str]) -> dict[str, Any]:
        busy = {str(i): [u for u in v if u > 0] for i, v in self.util.items()}
        return {
            "gpu_util_mean": {i: round(sum(v) / len(v), 1) for i, v in busy.items() if v},
            "gpu_contexts": {
                pids.get(pid, str(pid)): sorted(g) for pid, g in self.contexts.items()
            },
        }


def stacks(sup: Supervisor, names: list[str], logs: dict[str, Path]) -> dict[str, str]:
    """The stacks of every process still running: ``py-spy dump`` (when on PATH), then the
    workload's faulthandler (SIGUSR1 writes every thread's stack to the process's log)."""
    out: dict[str, str] = {}
    py_spy = shutil.which("py-spy")
    for name in names:
        parts = []
        if py_spy:
            try:
                proc = subprocess.run(
                    [py_spy, "dump", "--pid", str(sup.pid(name))],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                parts.append("py-spy dump:\n" + (proc.stdout + proc.stderr).strip())
            except (OSError, subprocess.TimeoutExpired) as err:
                parts.append(f"py-spy dump failed: {err}")
        log = logs[name]
        offset = log.stat().st_size if log.exists() else 0
        try:
            os.kill(sup.pid(name), signal.SIGUSR1)
        except ProcessLookupError:
            parts.append("exited before its stack could be read")
            out[name] = "\n".join(parts)
            continue
        time.sleep(1.5)
        with open(log, "rb") as f:
            f.seek(offset)
            dumped = f.read().decode(errors="replace").strip()
        parts.append("faulthandler (SIGUSR1):\n" + (dumped or "(nothing written)"))
        out[name] = "\n".join(parts)
    return out
