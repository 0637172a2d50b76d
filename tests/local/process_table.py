"""What the tests see of the machine's processes, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


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
