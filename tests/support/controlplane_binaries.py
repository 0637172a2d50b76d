"""The pinned control-plane binaries: where they live, whether they are built, and building
them with ``hack/build-controlplane.sh`` when they are not."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.support.controlplane_errors import ControlPlaneError

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-controlplane.sh"
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "helm",
    "kubeconform",
)
# Points the fixture at prebuilt binaries instead of the build script's cache.
BIN_DIR_ENV = "DISTGNN_CONTROLPLANE_BIN"


def binaries_dir() -> Path:
    """The directory the pinned binaries live in (built or not)."""
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        return Path(override)
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-bin-dir"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def binaries_built() -> bool:
    """Whether every pinned binary is built (the build script's stamp says so)."""
    if os.environ.get(BIN_DIR_ENV):
        return not missing_binaries(binaries_dir())
    check = subprocess.run(["bash", str(BUILD_SCRIPT), "--check"], capture_output=True)
    return check.returncode == 0


def missing_binaries(bin_dir: Path) -> list[str]:
    return [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]


def ensure_binaries(announce: Callable[[str], None] = print) -> Path:
    """Return the bin dir, building the binaries first (minutes when cold) if needed."""
    bin_dir = binaries_dir()
    if binaries_built():
        return bin_dir
    if os.environ.get(BIN_DIR_ENV):
        raise ControlPlaneError(
            f"{BIN_DIR_ENV}={bin_dir} lacks {', '.join(missing_binaries(bin_dir))}; "
            f"unset it to build them with {BUILD_SCRIPT}"
        )
    announce(
        f"control-plane binaries are not built yet: building them now with {BUILD_SCRIPT} "
        "(10-30 minutes cold on 2 cores; cached under ~/.cache/distgnn afterwards)"
    )
    build = subprocess.run(["bash", str(BUILD_SCRIPT)])
    if build.returncode != 0 or missing_binaries(bin_dir):
        raise ControlPlaneError(
            f"{BUILD_SCRIPT} failed (exit {build.returncode}); run it by hand to see why"
        )
    return bin_dir
