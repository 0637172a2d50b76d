"""What every distgnn image must satisfy: a numeric non-root user, an exec-form entrypoint that
needs no shell (its program is a binary, or a script whose interpreter is no shell), no compiler
or build tool left in it and nothing of the build (pip caches, apt lists and archives, the
source copy, the wheelhouse and its pip configuration), code the runtime user cannot modify."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from tests.support.image_run import HOST_PATH, IMAGE_UID, ImageRoot

SHELL_NAMES = {"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"}
# Compilers, linkers and assemblers, versioned and target-prefixed names included
# (gcc-12, x86_64-linux-gnu-gcc-12, ld.bfd); ld.so, the dynamic loader, is no linker.
BUILD_TOOLS = (
    "gcc", "gcc-[0-9]*", "*-gcc", "*-gcc-[0-9]*", "g++", "g++-[0-9]*", "*-g++", "*-g++-[0-9]*",
    "cc", "c++", "cpp", "cpp-[0-9]*", "*-cpp-[0-9]*", "make", "cmake", "ld", "ld.bfd", "ld.gold",
    "ld.lld", "*-ld", "*-ld.bfd", "*-ld.gold", "as", "*-as", "clang", "clang-[0-9]*", "clang++*",
    "nvcc",
)  # fmt: skip
BIN_DIRS = ("usr/bin", "usr/local/bin", "usr/sbin", "usr/local/sbin", "opt/conda/bin")
# Debian packages of a toolchain (headers of runtime libraries, such as a base's libpng-dev,
# are not tools).
BUILD_PACKAGES = re.compile(
    r"build-essential|make|cmake|gcc(-\d+)?|g\+\+(-\d+)?|cpp(-\d+)?|clang(-\d+)?|binutils"
)
# What a build leaves when it does not clean up after itself: (glob under the root, what it is).
LEFTOVERS = (
    ("root/.cache/pip", "pip's cache"),
    ("home/*/.cache/pip", "pip's cache"),
    ("tmp/pip-*", "pip's build folders"),
    ("var/lib/apt/lists/*_*", "apt's package lists"),
    ("var/cache/apt/*.bin", "apt's package cache"),
    ("var/cache/apt/archives/*.deb", "downloaded .debs"),
    ("src", "the build's copy of the source"),
    ("wheels/*", "the build's wheelhouse"),
    ("etc/xdg/pip/pip.conf", "the build's pip configuration"),
)
IMPORTS = (
    "import importlib.util as u, torch, torch_geometric, pymetis, prometheus_client, "
    "distgnn_workload.partitioner, distgnn_workload.sampler, distgnn_workload.trainer; "
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
    assert_needs_no_shell(image, command[0])
    found = sorted(
        {f"/{path.relative_to(image.root)}" for d in BIN_DIRS for tool in BUILD_TOOLS
         for path in (image.root / d).glob(tool)}
    )  # fmt: skip
    assert not found, f"build tools left in the image: {found}"
    packages = [p for p in installed_packages(image.root) if BUILD_PACKAGES.fullmatch(p)]
    assert not packages, f"toolchain packages left in the image: {packages}"
    left = [
        f"/{path.relative_to(image.root)} ({what})"
        for pattern, what in LEFTOVERS
        for path in image.root.glob(pattern)
    ]
    assert not left, f"the build left behind: {left}"
    for site in image.root.glob("usr/local/lib/python3*"):
        owner = site.stat().st_uid
        assert owner == 0, f"/{site.relative_to(image.root)} is owned by uid {owner}, not root"


def assert_needs_no_shell(image: ImageRoot, program: str) -> None:
    """``program`` (found on the image's PATH) is a binary, or a script whose interpreter is no
    shell: the command runs where the image holds no shell at all."""
    assert PurePosixPath(program).name not in SHELL_NAMES, f"the command {program} is a shell"
    path = which(image, program)
    with open(path, "rb") as stream:
        head = stream.read(256)
    if head.startswith(b"\x7fELF"):
        return
    assert head.startswith(b"#!"), f"{program} ({path}) is neither a binary nor a script"
    interpreter = head[2:].split(b"\n", 1)[0].split()
    names = [PurePosixPath(word.decode()).name for word in interpreter[:2]]
    if names and names[0] == "env":
        names = names[1:]
    assert names, f"{program} is a script with no interpreter"
    assert names[0] not in SHELL_NAMES, f"{program} is a script run by {names}"


def which(image: ImageRoot, program: str) -> Path:
    """Where ``program`` is in the image's root, as the image's PATH finds it."""
    dirs = ["/"] if "/" in program else image.image_env.get("PATH", HOST_PATH).split(":")
    for directory in dirs:
        path = resolve_in_root(image.root, str(PurePosixPath(directory) / program))
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise AssertionError(f"{program} is not on the image's PATH {dirs}")


def resolve_in_root(root: Path, inside: str, max_links: int = 40) -> Path:
    """``inside`` with its symlinks followed as the image sees them (absolute links are
    relative to ``root``, never to this machine's root)."""
    parts = [p for p in inside.split("/") if p not in ("", ".")]
    current = PurePosixPath("/")
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = current.parent
            continue
        host = root / str(current / part).lstrip("/")
        if host.is_symlink():
            max_links -= 1
            assert max_links >= 0, f"too many symlinks resolving {inside}"
            target = os.readlink(host)
            if target.startswith("/"):
                current = PurePosixPath("/")
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
        else:
            current = current / part
    return root / str(current).lstrip("/")


def installed_packages(root: Path) -> list[str]:
    """The Debian packages the image's dpkg database lists as installed."""
    status = root / "var" / "lib" / "dpkg" / "status"
    packages = []
    for stanza in status.read_text().split("\n\n") if status.exists() else []:
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line)
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            packages.append(fields["Package"])
    return packages


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
