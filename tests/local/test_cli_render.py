"""`distgnn render` and `distgnn crd` print what the operator would create."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api.contract import (
    CONFIG_FILE_NAME,
    ENV_JOB_UID,
    ENV_NAMESPACE,
    JobConfig,
    partition_key,
)
from distgnn_operator.cli import main

QUICKSTART = Path(__file__).parents[2] / "manifests" / "examples" / "quickstart.yaml"
QUICKSTART_HETERO = QUICKSTART.with_name("quickstart-hetero.yaml")


def _env(sts: dict[str, Any], name: str) -> str:
    container = sts["spec"]["template"]["spec"]["containers"][0]
    return str(next(e["value"] for e in container["env"] if e["name"] == name))


def test_render_prints_every_child_in_the_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(QUICKSTART), "-n", "team-a"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in docs] == [
        "NetworkPolicy",
        "ConfigMap",
        "PersistentVolumeClaim",
        "Job",
        "Service",
        "StatefulSet",
        "StatefulSet",
    ]
    assert {d["metadata"]["namespace"] for d in docs} == {"team-a"}
    trainer = docs[-1]
    assert trainer["metadata"]["name"] == "quickstart-trainer"
    assert _env(trainer, ENV_NAMESPACE) == "team-a"


def test_local_mode_ignores_kueue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job queued in Kueue renders (and so runs locally) exactly as one that is not: no
    Workload, no queue label on any child, no placement."""
    job = yaml.safe_load(QUICKSTART.read_text())
    assert main(["render", str(QUICKSTART), "--uid", "u1"]) == 0
    plain = capsys.readouterr().out
    job["metadata"]["labels"] = {
        "kueue.x-k8s.io/queue-name": "user",
        "kueue.x-k8s.io/priority-class": "high",
    }
    queued = tmp_path / "queued.yaml"
    queued.write_text(yaml.safe_dump(job))
    assert main(["render", str(queued), "--uid", "u1"]) == 0
    assert capsys.readouterr().out == plain
    assert "kueue" not in plain


def test_render_of_a_heterogeneous_job_carries_its_typed_spec_to_the_pods(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["render", str(QUICKSTART_HETERO)]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in docs].count("StatefulSet") == 1  # worker mode: trainers only
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    config = JobConfig.model_validate_json(config_map["data"][CONFIG_FILE_NAME])
    assert config.spec.dataset.is_hetero
    assert config.spec.worker_mode
    assert config.spec.model.arch.value == "rsage"
    assert config.spec.model.edge_fanouts == {
        "field_of_study__rev_has_topic__paper": [5, 3],
        "institution__rev_affiliated_with__author": [2, 2],
    }
    assert config.spec.model.embedding_size == 32
    assert config.partition_key == partition_key(config.spec)


def test_render_uid_is_stable_unless_given(capsys: pytest.CaptureFixture[str]) -> None:
    uids = []
    for extra in ([], [], ["--uid", "1234"]):
        assert main(["render", str(QUICKSTART), *extra]) == 0
        docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
        uids.append(_env(docs[-1], ENV_JOB_UID))
    assert uids[0] == uids[1] != uids[2] == "1234"


def test_render_rejects_an_invalid_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUICKSTART.read_text().replace("replicas: 2", "replicas: -1"))
    assert main(["render", str(bad)]) == 2
    captured = capsys.readouterr()
    assert "spec.trainers.replicas" in captured.err
    assert captured.out == ""


def test_crd_prints_the_distgnnjob_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd"]) == 0
    crd = yaml.safe_load(capsys.readouterr().out)
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "distgnnjobs.distgnn.io"


def test_the_cli_needs_neither_torch_nor_kopf(tmp_path: Path) -> None:
    """The operator image has no torch and a laptop may have no kopf: import, validate and
    render load neither."""
    code = (
        "import contextlib, io, sys\n"
        "from distgnn_operator.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['validate', {str(QUICKSTART)!r}]) == 0\n"
        f"    assert main(['render', {str(QUICKSTART)!r}]) == 0\n"
        "print(sorted(m for m in ('torch', 'kopf', 'kubernetes', 'distgnn_workload') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_render_takes_image_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    cpu, gpu = "registry.example/team/workload:1.0-cpu", "registry.example/team/workload:1.0-cuda"
    assert main(["render", str(QUICKSTART), "--cpu-image", cpu, "--gpu-image", gpu]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    images = {
        c["image"]
        for d in docs
        if d["kind"] in ("Job", "StatefulSet")
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert images == {cpu}  # the quickstart runs on CPU only
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    config = JobConfig.model_validate_json(config_map["data"][CONFIG_FILE_NAME])
    assert (config.spec.images.cpu, config.spec.images.gpu) == (cpu, gpu)


def test_render_rejects_a_bad_image_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(QUICKSTART), "--gpu-image", " spaced"]) == 2
    captured = capsys.readouterr()
    assert "--gpu-image" in captured.err
    assert captured.out == ""
