"""The hygiene checks themselves, on small root filesystems made here (no image, no root): a
clean root passes, and each thing an image must not hold fails with its reason."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.images.hygiene import assert_hygiene, resolve_in_root
from tests.support.image_run import IMAGE_UID, ImageRoot

ELF = b"\x7fELF\x02\x01\x01" + bytes(57)
CONFIG = {
    "User": f"{IMAGE_UID}:{IMAGE_UID}",
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
    "Entrypoint": ["python", "-m", "distgnn_operator"],
}
DPKG_CLEAN = (
    "Package: gcc-12-base\nStatus: install ok installed\n\n"
    "Package: libc-bin\nStatus: install ok installed\n\n"
    "Package: gcc-12\nStatus: deinstall ok config-files\n"
)


def write(root: Path, inside: str, data: bytes | str = b"", mode: int = 0o644) -> Path:
    path = root / inside
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)
    return path


def clean_root(root: Path) -> Path:
    """A merged-/usr root whose ``python`` is a binary behind an absolute symlink."""
    write(root, "usr/bin/python3.11", ELF, 0o755)
    (root / "usr/bin/python").symlink_to("/usr/bin/python3.11")
    (root / "bin").symlink_to("usr/bin")
    write(root, "usr/bin/ld.so", ELF, 0o755)  # the dynamic loader: no linker
    write(root, "var/lib/dpkg/status", DPKG_CLEAN)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    write(root, "var/lib/apt/lists/lock")
    (root / "usr/local/lib/python3.11").mkdir(parents=True)
    (root / "wheels").mkdir()  # an empty mount point of the build is harmless
    return root


def test_a_clean_root_passes(tmp_path: Path) -> None:
    root = clean_root(tmp_path)
    assert resolve_in_root(root, "/bin/python") == root / "usr/bin/python3.11"
    assert_hygiene(ImageRoot(root, CONFIG))
    # A script whose interpreter is Python needs no shell either.
    (root / "usr/bin/python").unlink()
    write(root, "usr/bin/python", "#!/usr/bin/env python3.11\n", 0o755)
    assert_hygiene(ImageRoot(root, CONFIG))


def _script_by_shell(root: Path) -> None:
    (root / "usr/bin/python").unlink()
    write(root, "usr/bin/python", '#!/bin/sh\nexec python3.11 "$@"\n', 0o755)


def _script_by_env_bash(root: Path) -> None:
    (root / "usr/bin/python").unlink()
    write(root, "usr/bin/python", "#!/usr/bin/env bash\n", 0o755)


def _root_owned_site(root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to uid 10001 needs root")
    os.chown(root / "usr/local/lib/python3.11", IMAGE_UID, IMAGE_UID)


CASES: dict[str, tuple[Callable[[Path], object], str]] = {
    "versioned compiler": (
        lambda r: write(r, "usr/bin/x86_64-linux-gnu-gcc-12", ELF, 0o755),
        "build tools",
    ),
    "make": (lambda r: write(r, "usr/bin/make", ELF, 0o755), "build tools"),
    "linker": (lambda r: write(r, "usr/bin/ld.bfd", ELF, 0o755), "build tools"),
    "compiler package": (
        lambda r: write(
            r,
            "var/lib/dpkg/status",
            DPKG_CLEAN + "\nPackage: gcc-12\nStatus: install ok installed\n",
        ),
        "toolchain packages",
    ),
    "pip cache": (lambda r: write(r, "root/.cache/pip/http/a/b"), "pip's cache"),
    "pip cache of a user": (lambda r: write(r, "home/distgnn/.cache/pip/x"), "pip's cache"),
    "apt lists": (
        lambda r: write(r, "var/lib/apt/lists/mirror.example.com_debian_dists_bookworm_InRelease"),
        "apt's package lists",
    ),
    "apt archives": (lambda r: write(r, "var/cache/apt/archives/gcc_12.deb"), "downloaded .debs"),
    "source copy": (lambda r: write(r, "src/pyproject.toml"), "the build's copy of the source"),
    "wheelhouse": (lambda r: write(r, "wheels/torch-2.7.1.whl"), "the build's wheelhouse"),
    "pip configuration": (
        lambda r: write(r, "etc/xdg/pip/pip.conf", "[global]\nno-index = true\n"),
        "the build's pip configuration",
    ),
    "shell entrypoint": (lambda r: None, "is a shell"),
    "script run by sh": (_script_by_shell, "script run by ['sh']"),
    "script run by env bash": (_script_by_env_bash, "script run by ['bash']"),
    "site-packages owned by the runtime user": (_root_owned_site, "not root"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_violation_fails_with_its_reason(case: str, tmp_path: Path) -> None:
    change, reason = CASES[case]
    root = clean_root(tmp_path)
    change(root)
    config = dict(CONFIG)
    if case == "shell entrypoint":
        config["Entrypoint"] = ["/bin/sh", "-c", "python -m distgnn_operator"]
    with pytest.raises(AssertionError) as failure:
        assert_hygiene(ImageRoot(root, config))
    assert reason in str(failure.value), str(failure.value)


@pytest.mark.parametrize("user", ["", "0:0", "distgnn", "10001"])
def test_a_user_other_than_numeric_10001_fails(user: str, tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="image user"):
        assert_hygiene(ImageRoot(clean_root(tmp_path), {**CONFIG, "User": user}))
