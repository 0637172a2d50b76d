"""`distgnn run` of a heterogeneous job end to end: the real CLI, partition Job and trainers.

A reduced quickstart-hetero (the example, with a smaller MAG-shaped graph, fewer classes and
epochs) runs through the console script as a subprocess on gloo: in worker mode with two
trainers, and in server-client mode with two typed sampler servers and two trainers. A
heterogeneous job whose partitions are not one per holder is refused before any process
starts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from distgnn_api.contract import EXIT_BAD_INPUT
from distgnn_api.spec import EvaluationKind, parse_job
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
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


def _graph_and_majority(job: dict[str, Any]) -> tuple[HeteroGraphData, float]:
    """The job's generated graph and the share of its test nodes in their largest class."""
    seed = parse_job(job).spec.dataset.synthetic_mag
    assert seed is not None
    graph = generate_mag(SyntheticHeteroConfig(scale=SCALE, num_classes=CLASSES, seed=seed.seed))
    return graph, float(np.bincount(graph.y[graph.test_mask]).max() / graph.test_mask.sum())


def test_quickstart_hetero_runs_end_to_end(tmp_path: Path) -> None:
    job = _reduced()
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    result = run.succeeded()
    assert result.epochs == EPOCHS
    assert result.test_accuracy_kind == EvaluationKind.full
    graph, majority = _graph_and_majority(job)
    assert result.test_accuracy is not None
    assert result.test_accuracy > 2 * majority, (result, majority)

    stats = json.loads((run.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == list(range(1, EPOCHS + 1))
    assert all(e["seeds"] >= int(graph.train_mask.sum()) for e in stats["epochs"])
    logs = sorted(p.name for p in (run.run_dir / "logs").iterdir())
    assert logs == ["partition-0.log", "partition-0.termination", "trainer-0.log", "trainer-1.log"]
    out = " ".join(run.proc.stdout.split())
    assert "Succeeded: quickstart-hetero" in out
    assert f"test accuracy {result.test_accuracy:.4f} (full neighbourhood)" in out


def test_quickstart_hetero_runs_with_sampler_servers(tmp_path: Path) -> None:
    # server-client mode: two typed sampler servers, two trainers drawing from both
    job = _reduced(samplers={"replicas": 2, "gpusPerPod": 0, "concurrency": 2})
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    result = run.succeeded()
    assert result.epochs == EPOCHS
    graph, majority = _graph_and_majority(job)
    assert result.test_accuracy is not None
    assert result.test_accuracy > 2 * majority, (result, majority)

    logs = run.run_dir / "logs"
    assert sorted(p.name for p in logs.glob("*.log")) == [
        "partition-0.log",
        "sampler-0.log",
        "sampler-1.log",
        "trainer-0.log",
        "trainer-1.log",
    ]
    stats = json.loads((run.run_dir / "training_stats.json").read_text())
    epochs = stats["epochs"]
    assert [e["epoch"] for e in epochs] == list(range(1, EPOCHS + 1))
    num_train = int(graph.train_mask.sum())
    assert all(num_train <= e["seeds"] < 1.25 * num_train for e in epochs), epochs

    # Every batch a trainer stepped on came from a sampler server: the samplers served as
    # many batches as the trainers received, and exactly the seeds the trainers counted
    # (training steps, then each validation; the final test figure is full-neighbourhood,
    # computed by the trainers from the typed store, no sampler involved).
    served = [_served(logs / f"sampler-{h}.log") for h in range(2)]
    assert all(batches > 0 for batches, _ in served), served
    received = [_received(logs / f"trainer-{r}.log") for r in range(2)]
    assert sum(b for b, _ in served) == sum(received)
    assert sum(received) >= sum(e["steps"] for e in epochs)
    validations = sum(e.get("val_accuracy") is not None for e in epochs) + 1
    assert result.test_accuracy_kind == EvaluationKind.full
    expected = sum(e["seeds"] for e in epochs) + validations * int(graph.val_mask.sum())
    assert sum(s for _, s in served) == expected, (served, epochs)
    assert "sampler 0 serving typed batches" in (logs / "sampler-0.log").read_text()


def _served(log: Path) -> tuple[int, int]:
    """(batches, seeds) a typed sampler server logged at its exit."""
    found = re.search(r"served (\d+) batches \((\d+) seeds\)", log.read_text())
    assert found, log.read_text()[-3000:]
    return int(found[1]), int(found[2])


def _received(log: Path) -> int:
    found = re.search(r"received (\d+) typed batches from sampler servers", log.read_text())
    assert found, log.read_text()[-3000:]
    return int(found[1])


def test_a_hetero_job_with_more_partitions_than_samplers_is_refused(tmp_path: Path) -> None:
    job = _reduced(
        samplers={"replicas": 1, "gpusPerPod": 0},
        partition={"algorithm": "metis", "numPartitions": 2},
    )
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    assert run.proc.returncode == EXIT_BAD_INPUT, run.output
    assert "spec.partition.numPartitions" in run.output
    assert "one partition per holder (samplers.replicas" in run.output
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").rglob("*.npy"))
