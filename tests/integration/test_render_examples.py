"""`distgnn render` output for every example passes the API server's server-side dry-run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "manifests" / "examples").glob("*.yaml"))
CRD = ROOT / "charts" / "distgnn" / "crds" / "distgnn.io_distgnnjobs.yaml"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crd_installed(control_plane: Any) -> Any:
    """The DistGNNJob CRD, established, so that jobs themselves can be dry-run too."""
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/distgnnjobs.distgnn.io"
    )
    return control_plane


def _render(example: Path, namespace: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "distgnn_operator.cli", "render", str(example), "-n", namespace],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_children_pass_server_side_dry_run(
    crd_installed: Any, namespace: str, example: Path
) -> None:
    rendered = _render(example, namespace)
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered) if d]
    assert "StatefulSet" in kinds
    assert "ConfigMap" in kinds
    proc = crd_installed.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=rendered, check=False
    )
    assert proc.returncode == 0, proc.stderr
    # One line per object the API server accepted (and would have created).
    assert len([line for line in proc.stdout.splitlines() if "(server dry run)" in line]) == len(
        kinds
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_job_passes_server_side_dry_run(
    crd_installed: Any, namespace: str, example: Path
) -> None:
    proc = crd_installed.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(example), check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "distgnnjob.distgnn.io" in proc.stdout


def test_dry_run_can_fail(crd_installed: Any, namespace: str) -> None:
    """The server rejects a broken child, so the checks above can fail."""
    rendered = _render(EXAMPLES[0], namespace)
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    sts["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = 70000
    proc = crd_installed.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump(sts),
        check=False,
    )
    assert proc.returncode != 0
    assert "containerPort" in proc.stderr
