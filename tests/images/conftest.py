"""The images tier: build each image with ``hack/build-images.sh`` (cached: an unchanged image
is not rebuilt) and unpack its OCI archive into a root filesystem, one image per module.

Building needs root (buildah with chroot isolation, Debian's packages installed by apt-get);
elsewhere the tier is skipped with the reason. ``DISTGNN_IMAGES`` (comma-separated, default
all three) names the images the tier builds and checks; the others' tests are skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.image_run import ImageRoot
from tests.support.oci_image import OciArchive

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "build-images.sh"
# A cold build downloads torch (GBs) and writes whole root filesystems: allow an hour.
BUILD_TIMEOUT_S = 3600.0
IMAGES = ("operator", "workload-cpu", "workload-cuda")
SELECTED_ENV = "DISTGNN_IMAGES"


def selected() -> set[str]:
    names = {n.strip() for n in os.environ.get(SELECTED_ENV, ",".join(IMAGES)).split(",")}
    unknown = names - set(IMAGES) - {""}
    if unknown:
        raise pytest.UsageError(f"{SELECTED_ENV}: unknown images {sorted(unknown)}; use {IMAGES}")
    return names


_built: dict[str, OciArchive] = {}


def build_image(name: str, log_dir: Path) -> OciArchive:
    """Run the build script for one image (a cache hit when nothing changed); its archive."""
    if name in _built:
        return _built[name]
    if name not in selected():
        pytest.skip(f"{name} is not in {SELECTED_ENV}={os.environ.get(SELECTED_ENV)}")
    if os.geteuid() != 0:
        pytest.skip("building images needs root (buildah --isolation chroot, apt-get)")
    check = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--check", name],
        cwd=REPO_ROOT,
        capture_output=True,
        check=False,
    )
    if check.returncode == 0:  # current: no build, no wait on the build lock
        cache = Path(os.environ.get("DISTGNN_CACHE", Path.home() / ".cache" / "distgnn"))
        _built[name] = OciArchive(cache / "images" / f"{name}.oci.tar")
        return _built[name]
    log = log_dir / f"build-{name}.log"
    with open(log, "wb") as out:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT), name],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    text = log.read_text(errors="replace")
    assert result.returncode == 0, (
        f"build-images.sh {name} exited {result.returncode}:\n{text[-6000:]}"
    )
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"{name} ")]
    archive = OciArchive(Path(line.split()[-1]))
    _built[name] = archive
    return archive


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], ImageRoot]]:
    """``unpacked(name)``: the image built and unpacked; the root is deleted after the module
    (a workload root holds GBs)."""
    roots: list[Path] = []

    def unpack(name: str) -> ImageRoot:
        work = tmp_path_factory.mktemp(name)
        archive = build_image(name, work)
        root = archive.unpack(work / "rootfs")
        roots.append(root)
        return ImageRoot(root, archive.config)

    yield unpack
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
