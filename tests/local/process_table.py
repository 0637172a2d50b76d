"""What the tests see of the machine's processes, read from /proc (Linux)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from distgnn_api.contract import ENV_JOB_UID

RUN_MARKER = "LOCAL_RUN_UNDER_TEST"
"""Set in the environment of a ``distgnn run`` that a test starts (to the job's UID): every
process of that run inherits it, as /proc shows them. A process forked by ``--preload``'s
zygote shows the zygote's environment there, not its own (no ``DISTGNN_JOB_UID``), but the
zygote inherited the marker from ``distgnn run``. (Not a ``DISTGNN_`` name: the launch plan
does not pass those on.)"""


def processes_with_env(var: str, value: str) -> list[int]:
    """Pids of live processes whose environment has var=value (zombies excluded)."""
    needle = f"{var}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in env:
            found.append(int(entry.name))
    return found


def run_env(uid: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the :data:`RUN_MARKER` of the run ``uid``."""
    return {**(os.environ if env is None else env), RUN_MARKER: uid}


def processes_of_run(uid: str) -> list[int]:
    """Pids of the live processes of the run ``uid``: those with its job UID, and those that
    inherited the run's marker (``distgnn run`` itself, its zygote and the zygote's children)."""
    return sorted(
        set(processes_with_env(ENV_JOB_UID, uid)) | set(processes_with_env(RUN_MARKER, uid))
    )
