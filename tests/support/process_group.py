"""A command run as the leader of its own process group with its output in a log file, and
stopped with its whole group: SIGTERM, then SIGKILL once the grace period has passed."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def process_group(
    command: Sequence[str], env: Mapping[str, str], log_path: Path, *, grace: float = 20.0
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` in a new session writing ``log_path``; stop its group on the way out."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            list(command),
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        stop_group(process, grace=grace)


def stop_group(process: subprocess.Popen[bytes], *, grace: float = 20.0) -> None:
    """SIGTERM to the process group of a still-running leader, SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
