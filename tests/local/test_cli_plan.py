"""`distgnn plan` on every example, its JSON, `--strict` exit codes, and `distgnn validate`'s
capacity warnings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from distgnn_operator.cli import EXIT_DOES_NOT_FIT, main
from tests.local.cli_command import distgnn_cli
from tests.local.cli_jobs import EXAMPLES, VALID, write_job

TINY = VALID + "  trainers:\n    replicas: 2\n    gpusPerPod: 0\n"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_plan_every_example(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plan for each example (the CLI's main, in this process), and the installed command's
    JSON that a tool can read."""
    code = main(["plan", "--strict", str(example)])
    text = capsys.readouterr()
    # the examples' own requests and limits hold their plans
    assert code == 0, text.out + text.err
    assert "Per pod" in text.out
    assert "trainer" in text.out
    out = subprocess.run(
        [*distgnn_cli(), "plan", "--json", str(example)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    roles = {r["role"]: r for r in plan["roles"]}
    assert "partition" in roles
    assert "trainer" in roles
    assert all(r["hostBytesPerPod"] > 0 for r in roles.values())
    assert plan["volumeBytes"] > 0
    assert plan["stepsPerEpoch"] >= 1


def test_strict_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path, TINY)
    assert main(["plan", "--strict", str(job)]) == 0
    assert "fits" in capsys.readouterr().out

    short = write_job(
        tmp_path,
        TINY.replace(
            "    gpusPerPod: 0\n", "    gpusPerPod: 0\n    resources: {limits: {memory: 256Mi}}\n"
        ),
    )
    assert main(["plan", str(short)]) == 0  # not strict: a report only
    assert main(["plan", "--strict", str(short)]) == EXIT_DOES_NOT_FIT
    out = capsys.readouterr().out
    assert "trainer: needs" in out
    assert "spec.trainers.resources.limits.memory" in out

    assert main(["plan", "--strict", "--json", str(short)]) == EXIT_DOES_NOT_FIT
    found = json.loads(capsys.readouterr().out)["shortfalls"]
    assert [(s["role"], s["resource"]) for s in found] == [("trainer", "memory")]
    assert found[0]["short"] == found[0]["need"] - 256 * 2**20


def test_strict_gpu_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path, TINY.replace("gpusPerPod: 0", "gpusPerPod: 1"))
    assert main(["plan", "--strict", str(job)]) == 0
    assert main(["plan", "--strict", "--gpu-memory", "0.01", str(job)]) == EXIT_DOES_NOT_FIT
    assert "GPU memory per card" in capsys.readouterr().out


def test_size_of_an_ogb_dataset_comes_from_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(
        tmp_path,
        TINY.replace("synthetic: {numNodes: 1000, numEdges: 5000}", "ogb: {path: data/mine}"),
    )
    assert main(["plan", str(job)]) == 2
    assert "--nodes, --edges" in capsys.readouterr().err
    args = ["plan", "--json", "--nodes", "500", "--edges", "2000", "--features", "8", str(job)]
    assert main(args) == 0
    graph = json.loads(capsys.readouterr().out)["graph"]
    assert (graph["num_nodes"], graph["num_edges"], graph["num_features"]) == (500, 4000, 8)


def test_validate_warns_on_a_job_that_does_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, TINY)
    assert main(["validate", str(job)]) == 0
    assert "warning" not in capsys.readouterr().out
    short = write_job(
        tmp_path,
        TINY.replace("gpusPerPod: 0", "gpusPerPod: 1").replace(
            "numEdges: 5000", "numEdges: 5000, numFeatures: 512"
        ),
    )
    assert main(["validate", "--gpu-memory", "0.01", str(short)]) == 0
    out = capsys.readouterr().out
    assert "is valid" in out
    assert "warning:" in out
    assert "GPU memory per card" in out
