"""The trainer pod's process layout: one training process, or a supervisor and one per GPU.

With ``DISTGNN_PROCS_PER_POD`` = 1 the pod's process trains itself and serves ``/metrics``
and ``/progress``. With more, it supervises: it starts one child per local rank (the same
entry point, with ``DISTGNN_LOCAL_RANK`` set), serves the children's metrics (written in
prometheus-client's multiprocess mode) and local rank 0's progress on the pod's one metrics
port, and exits with the first failing child's code after stopping the others, so that
the pod fails as a whole.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from distgnn_api.contract import (
    ENV_LOCAL_RANK,
    ENV_PROGRESS_FILE,
    EXIT_OK,
    ContractError,
    Role,
    WorkloadEnv,
    role_module,
)
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.status_server import multiprocess_registry, progress_from_file

log = logging.getLogger(__name__)

PROMETHEUS_MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"  # prometheus-client's own variable
STOP_GRACE_S = 10.0


def main(proc: RoleProcess) -> int:
    """The trainer pod's body: train here, or supervise one process per local GPU."""
    from distgnn_workload.trainer import process

    if WorkloadEnv.setting(ENV_LOCAL_RANK) is not None:
        mirror = WorkloadEnv.setting(ENV_PROGRESS_FILE)
        return process.run(
            proc,
            progress_file=Path(mirror) if mirror and proc.local_rank == 0 else None,
            serve_status=False,
        )
    if proc.env.procs_per_pod == 1:
        return process.run(proc)
    return supervise(proc)


def local_rank() -> int:
    """This process's local rank: set by the supervisor for its children, else 0."""
    raw = WorkloadEnv.setting(ENV_LOCAL_RANK) or "0"
    try:
        return int(raw)
    except ValueError:
        raise ContractError(f"{ENV_LOCAL_RANK}={raw!r} is not an integer") from None


def supervise(proc: RoleProcess) -> int:
    """Run one child per local rank; fail fast when any fails."""
    env = proc.env
    if proc.finished():
        log.info("the job's result exists: training is complete")
        return EXIT_OK
    work = Path(tempfile.mkdtemp(prefix="distgnn-trainer-"))
    metrics_dir = work / "metrics"
    metrics_dir.mkdir()
    progress = work / "progress.json"
    proc.serve_status(
        progress=progress_from_file(progress), registry=multiprocess_registry(metrics_dir)
    )
    children: list[subprocess.Popen[bytes]] = []
    for local in range(env.procs_per_pod):
        child_env = dict(os.environ)
        child_env[ENV_LOCAL_RANK] = str(local)
        child_env[PROMETHEUS_MULTIPROC_DIR] = str(metrics_dir)
        child_env[ENV_PROGRESS_FILE] = str(progress)
        children.append(
            subprocess.Popen([sys.executable, "-m", role_module(Role.trainer)], env=child_env)
        )
    log.info("started %d training processes", len(children))

    def forward(signum: int, _frame: FrameType | None) -> None:
        for c in children:
            if c.poll() is None:
                c.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        codes = [c.poll() for c in children]
        failed = [(i, code) for i, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            local, code = failed[0]
            log.error("training process %d exited with %s; stopping the others", local, code)
            _stop(children)
            return code if code is not None and code > 0 else 1
        if all(code == 0 for code in codes):
            return EXIT_OK
        time.sleep(0.2)


def _stop(children: list[subprocess.Popen[bytes]]) -> None:
    for c in children:
        if c.poll() is None:
            c.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for c in children:
        try:
            c.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.kill()
            c.wait()
