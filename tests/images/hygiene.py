"""What every distgnn image must satisfy: a numeric non-root user, an exec-form entrypoint that
needs no shell, no compiler or build tool left in it, code the runtime user cannot modify."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.image_run import IMAGE_UID, ImageRoot

SHELLS = {"sh", "bash", "dash", "/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash"}
BUILD_TOOLS = ("gcc", "cc", "c++", "g++", "cpp", "make", "ld", "as", "clang", "nvcc")
BIN_DIRS = ("usr/bin", "usr/local/bin", "usr/sbin", "usr/local/sbin")
IMPORTS = (
    "import importlib.util as u, torch, torch_geometric, pymetis, prometheus_client, "
    "distgnn_workload.partition, distgnn_workload.sampler, distgnn_workload.trainer; "
    "absent = [m for m in ('kopf', 'kubernetes') if u.find_spec(m)]; "
    "assert not absent, f'operator packages in the workload image: {absent}'; "
    "print(torch.__version__, torch.version.cuda, hasattr(torch, 'cuda'))"
)
# Writing under the root must fail: the image runs with a read-only root filesystem.
READ_ONLY = (
    "import errno\n"
    "try:\n    open('/usr/lib/distgnn-probe', 'w')\n"
    "except OSError as err:\n    print('errno', errno.errorcode[err.errno])\n"
)


def run_in(image: ImageRoot, argv: Sequence[str], timeout: float = 300.0) -> str:
    result = subprocess.run(
        image.command(argv),
        env=image.environ(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result.stdout


def assert_hygiene(image: ImageRoot) -> None:
    user = str(image.config.get("User", ""))
    assert user == f"{IMAGE_UID}:{IMAGE_UID}", f"image user {user!r}, expected numeric {IMAGE_UID}"
    command = image.entrypoint
    assert command, "the image sets neither Entrypoint nor Cmd"
    assert command[0] not in SHELLS, f"the image's command {command} goes through a shell"
    found = [
        f"/{d}/{tool}"
        for d in BIN_DIRS
        for tool in BUILD_TOOLS
        if (image.root / d / tool).exists() or (image.root / d / tool).is_symlink()
    ]
    assert not found, f"build tools left in the image: {found}"
    for site in image.root.glob("usr/local/lib/python3*"):
        owner = site.stat().st_uid
        assert owner == 0, f"/{site.relative_to(image.root)} is owned by uid {owner}, not root"


def process_ids(pid: int, timeout_s: float = 30.0) -> tuple[int, int]:
    """The real uid and gid of ``pid`` once it left the root-run setup (``unshare``, ``sh``)."""
    status = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + timeout_s
    while True:
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        uid, gid = int(fields["Uid"].split()[0]), int(fields["Gid"].split()[0])
        if uid != 0 or time.monotonic() > deadline:
            return uid, gid
        time.sleep(0.1)
