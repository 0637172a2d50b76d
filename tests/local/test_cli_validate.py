"""`distgnn validate` and the job-file errors every command shares: exit 2, field named."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from distgnn_operator.cli import load_job, main
from distgnn_operator.local.job_plan import check_supported
from tests.local.cli_jobs import EXAMPLES, VALID, write_job


def _refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, change: tuple[str, str]
) -> str:
    """What ``distgnn validate`` prints on stderr for ``job`` with ``change`` made; it must
    exit 2."""
    text = job.replace(*change)
    assert text != job
    assert main(["validate", str(write_job(tmp_path, text))]) == 2
    return capsys.readouterr().err


def test_valid_job_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(write_job(tmp_path, VALID))]) == 0
    assert "DistGNNJob tiny is valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: distgnn.io/v1alpha1\nkind: [DistGNNJob\n", "malformed YAML"),
        ("spec:\n  a: 1\n b: 2\n", "malformed YAML"),
    ],
)
def test_malformed_yaml_exits_2_with_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = write_job(tmp_path, text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    # The file, then line:column of the problem.
    assert re.search(rf"{re.escape(str(path))}:\d+:\d+: {expected}", err), err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            ("  model: {numLayers: 2, fanout: [5, 5]}", "  model: {numLayers: 3, fanout: [5, 5]}"),
            "spec.model.fanout",
        ),
        (("numNodes: 1000", "numNodes: -4"), "spec.dataset.synthetic.numNodes"),
        (("  model:", "  trainers: {replicas: 0}\n  model:"), "spec.trainers.replicas"),
        (("  model:", "  modle: {}\n  model:"), "spec.modle"),
        (("name: tiny", "name: Not_A_DNS_Label"), "metadata.name"),
        (("kind: DistGNNJob", "kind: Job"), "kind"),
    ],
)
def test_invalid_field_exits_2_naming_the_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    field: str,
) -> None:
    err = _refused(tmp_path, capsys, VALID, change)
    assert f"  {field}: " in err


def test_missing_file_and_empty_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(tmp_path / "absent.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["validate", str(write_job(tmp_path, "# nothing\n"))]) == 2
    assert "no YAML document" in capsys.readouterr().err


def test_run_rejects_an_invalid_job_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_job(tmp_path, VALID.replace("fanout: [5, 5]", "fanout: [5]"))
    data = tmp_path / "data"
    assert main(["run", str(path), "--data-dir", str(data)]) == 2
    assert "spec.model.fanout" in capsys.readouterr().err
    assert not data.exists()


def test_console_script_exit_code(tmp_path: Path) -> None:
    """The installed command itself exits 2 and names the field on stderr."""
    path = write_job(tmp_path, VALID.replace("numNodes: 1000", "numNodes: many"))
    proc = subprocess.run(
        [sys.executable, "-m", "distgnn_operator.cli", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "spec.dataset.synthetic.numNodes" in proc.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(example: Path) -> None:
    assert main(["validate", str(example)]) == 0
    # what distgnn run checks before it starts anything
    check_supported(load_job(str(example)).spec)


HETERO = """\
apiVersion: distgnn.io/v1alpha1
kind: DistGNNJob
metadata:
  name: mag
spec:
  dataset:
    syntheticMag: {scale: 0.01}
  samplers: {replicas: 0}
  model:
    arch: rsage
    numLayers: 2
    fanout: [5, 5]
    edgeFanouts: {author__writes__paper: [3, 2]}
"""


def test_a_heterogeneous_job_is_valid_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(write_job(tmp_path, HETERO))]) == 0
    out = capsys.readouterr().out
    assert "DistGNNJob mag is valid" in out
    assert "heterogeneous graph, target paper, model rsage" in out
    assert main(["validate", str(write_job(tmp_path, VALID))]) == 0
    assert "heterogeneous graph" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "field", "phrase"),
    [
        (("[3, 2]", "[3]"), "spec.model.edgeFanouts", "one entry per layer"),
        (("author__writes__paper", "author__cites__paper"), "spec.model.edgeFanouts", "does not"),
        (
            ("author__writes__paper", "author_writes_paper"),
            "spec.model.edgeFanouts",
            "src__rel__dst",
        ),
        (("arch: rsage", "arch: sage"), "spec.model.arch", "set model.arch to rsage"),
        (
            ("{scale: 0.01}", "{scale: 0.01}\n    hetero: {targetNodeType: author}"),
            "spec.dataset.hetero.targetNodeType",
            "labels on paper only",
        ),
        (
            ("samplers: {replicas: 0}", "samplers: {replicas: 0}\n  partition: {numPartitions: 4}"),
            "spec.partition.numPartitions",
            "one partition per holder",
        ),
    ],
)
def test_a_bad_heterogeneous_job_exits_2_naming_the_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    field: str,
    phrase: str,
) -> None:
    err = _refused(tmp_path, capsys, HETERO, change)
    assert f"  {field}: " in err
    assert phrase in err


def test_validate_refuses_what_run_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job the API server admits but whose graph is too small for it (the size the spec
    states): both commands exit 2 with the same field and fix, and run starts nothing."""
    text = VALID.replace("{numNodes: 1000, numEdges: 5000}", "{numNodes: 8, numEdges: 20}")
    text += "  samplers: {replicas: 16}\n"
    path = write_job(tmp_path, text)
    assert main(["validate", str(path)]) == 2
    refused = capsys.readouterr().err
    assert "passes the CRD's rules" in refused
    assert "spec.samplers.replicas: 16 partitions exceed the graph's 8 nodes" in refused
    data = tmp_path / "data"
    assert main(["run", str(path), "--data-dir", str(data)]) == 2
    ran = capsys.readouterr().err
    assert "spec.samplers.replicas: 16 partitions exceed the graph's 8 nodes" in ran
    assert not data.exists()
