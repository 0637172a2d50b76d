"""What the GPU machine runs (``distgnn run``, the builders, the launch plan, the e2e tests
and the GPU benchmark) imports without kopf, kubernetes or pydantic-settings: that machine
has torch and PyG, not the operator's dependencies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED = ("kopf", "kubernetes", "pydantic_settings")
REPO = Path(__file__).resolve().parents[2]

_BLOCKER = f"""
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is not installed on this machine")
        return None
sys.meta_path.insert(0, Blocked())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-c", _BLOCKER + code],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def test_the_blocker_blocks() -> None:
    proc = _run("import kopf")
    assert proc.returncode != 0
    assert "kopf is not installed on this machine" in proc.stderr


@pytest.mark.parametrize(
    "module",
    [
        "distgnn_operator.builders",
        "distgnn_operator.cli",
        "tests.e2e.workload_launcher",
    ],
)
def test_imports_without_the_operators_dependencies(module: str) -> None:
    # The repository root is appended after start-up (``tests`` lives there; ``operator``
    # of the standard library is already imported, so the folder cannot shadow it).
    proc = _run(f"sys.path.append({str(REPO)!r})\nimport {module}")
    assert proc.returncode == 0, proc.stderr


def test_every_module_of_local_mode_imports_without_them() -> None:
    listed = {p.stem for p in (REPO / "operator" / "local").glob("*.py") if p.stem != "__init__"}
    code = (
        "import pkgutil, distgnn_operator.local as m\n"
        "for info in pkgutil.iter_modules(m.__path__):\n"
        "    __import__(f'distgnn_operator.local.{info.name}')\n"
        "    print(info.name)\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == listed


def test_distgnn_run_validates_and_renders_without_them(tmp_path: Path) -> None:
    job = REPO / "manifests" / "examples" / "quickstart.yaml"
    code = (
        "import contextlib, io\n"
        "from distgnn_operator.cli import main\n"
        "from distgnn_operator.local.runner import RunOptions, run_job\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['validate', {str(job)!r}]) == 0\n"
        f"    assert main(['render', {str(job)!r}]) == 0\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
