"""`distgnn run` of a heterogeneous link-prediction job end to end (author__writes__paper
of a small syntheticMag): the real CLI, partition Job, samplers and trainers on gloo, in
server-client mode (two sampler servers, two trainers) and in worker mode (two trainers).
The test edges rank against fixed negative papers well above chance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api.contract import ENV_JOB_UID, RESULT_FILE, Result
from tests.local.process_table import processes_with_env
from tests.local.test_run_e2e import _run, _write

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "quickstart-hetero-link.yaml"
NEGATIVES, EPOCHS = 50, 2
# MRR of a random ranking among the positive and its 50 negatives: the mean of 1/r, r = 1..51
RANDOM_MRR = sum(1 / r for r in range(1, NEGATIVES + 2)) / (NEGATIVES + 1)


def _reduced(**spec: Any) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    job["spec"]["dataset"]["syntheticMag"]["scale"] = 0.005
    job["spec"]["linkPrediction"]["evaluation"].update(
        {"negatives": NEGATIVES, "hitsAt": [1, 10], "maxPositives": 500}
    )
    job["spec"]["training"].update({"epochs": EPOCHS, "batchSize": 256})
    job["spec"].update(spec)
    return job


@pytest.mark.parametrize(
    "samplers",
    [{"replicas": 2, "gpusPerPod": 0, "workers": 1}, {"replicas": 0}],
    ids=["server-client", "worker"],
)
def test_hetero_link_runs_end_to_end(tmp_path: Path, samplers: dict[str, Any]) -> None:
    job = _reduced(samplers=samplers)
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    assert run.proc.returncode == 0, run.output
    assert processes_with_env(ENV_JOB_UID, run.uid) == []

    result = Result.model_validate_json((run.run_dir / RESULT_FILE).read_text())
    assert result.job_uid == run.uid
    assert result.epochs == EPOCHS
    assert result.test_accuracy is None
    assert result.test_link is not None
    assert result.val_link is not None
    assert 0 < result.test_link.positives <= 500
    assert set(result.test_link.hits) == {"1", "10"}
    assert result.test_link.mrr > 1.5 * RANDOM_MRR, (result, RANDOM_MRR)

    stats = json.loads((run.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == list(range(1, EPOCHS + 1))
    logs = {p.name for p in (run.run_dir / "logs").iterdir()}
    assert ("sampler-0.log" in logs) == (samplers["replicas"] == 2)
    out = " ".join(run.proc.stdout.split())
    assert "Succeeded: quickstart-hetero-link" in out
    assert f"test ranking MRR {result.test_link.mrr:.4f}" in out
