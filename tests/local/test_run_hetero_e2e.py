"""`distgnn run` of a heterogeneous job end to end: the real CLI, partition Job and trainers.

A reduced quickstart-hetero (the example, with a smaller MAG-shaped graph, fewer classes and
epochs) runs through the console script as a subprocess, in worker mode with two trainers
on gloo. A heterogeneous job with sampler servers is refused before any process starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from distgnn_api.contract import ENV_JOB_UID, EXIT_BAD_INPUT, RESULT_FILE, Result
from distgnn_api.spec import EvaluationKind, parse_job
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from tests.local.process_table import processes_with_env
from tests.local.test_run_e2e import _run, _write

pytestmark = pytest.mark.e2e

QUICKSTART_HETERO = Path(__file__).parents[2] / "manifests" / "examples" / "quickstart-hetero.yaml"
SCALE, CLASSES, EPOCHS = 0.005, 8, 4


def _reduced(**spec: Any) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(QUICKSTART_HETERO.read_text())
    job["spec"]["dataset"]["syntheticMag"].update({"scale": SCALE, "numClasses": CLASSES})
    job["spec"]["training"].update({"epochs": EPOCHS, "batchSize": 128})
    job["spec"].update(spec)
    return job


def test_quickstart_hetero_runs_end_to_end(tmp_path: Path) -> None:
    job = _reduced()
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    assert run.proc.returncode == 0, run.output
    assert processes_with_env(ENV_JOB_UID, run.uid) == []

    result = Result.model_validate_json((run.run_dir / RESULT_FILE).read_text())
    assert result.job_uid == run.uid
    assert result.epochs == EPOCHS
    assert result.test_accuracy_kind == EvaluationKind.sampled
    seed = parse_job(job).spec.dataset.synthetic_mag
    assert seed is not None
    graph = generate_mag(SyntheticHeteroConfig(scale=SCALE, num_classes=CLASSES, seed=seed.seed))
    majority = float(np.bincount(graph.y[graph.test_mask]).max() / graph.test_mask.sum())
    assert result.test_accuracy > 2 * majority, (result, majority)

    stats = json.loads((run.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == list(range(1, EPOCHS + 1))
    assert all(e["seeds"] >= int(graph.train_mask.sum()) for e in stats["epochs"])
    logs = sorted(p.name for p in (run.run_dir / "logs").iterdir())
    assert logs == ["partition-0.log", "partition-0.termination", "trainer-0.log", "trainer-1.log"]
    out = " ".join(run.proc.stdout.split())
    assert "Succeeded: quickstart-hetero" in out
    assert f"test accuracy {result.test_accuracy:.4f} (sampled" in out


def test_a_hetero_job_with_sampler_servers_is_refused(tmp_path: Path) -> None:
    job = _reduced(samplers={"replicas": 1, "gpusPerPod": 0})
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    assert run.proc.returncode == EXIT_BAD_INPUT, run.output
    assert "spec.samplers.replicas" in run.output
    assert "worker mode" in run.output
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.npy"))
