"""Run a reduced link-prediction example with `distgnn run` and check what every such run
must show: a clean exit, no process left, a ranking result for each epoch, and the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from distgnn_api.contract import Result
from tests.local.test_run_e2e import _run, _write

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"
NEGATIVES, EPOCHS, MAX_POSITIVES = 50, 2, 500
HITS_AT = [1, 10]
RANDOM_MRR = sum(1 / r for r in range(1, NEGATIVES + 2)) / (NEGATIVES + 1)
"""MRR of a random ranking among the positive and its 50 negatives: the mean of 1/r, r=1..51."""


def reduced_link_job(example: str, dataset: str, scale: float, **spec: Any) -> dict[str, Any]:
    """The example (a file under manifests/examples) at a small scale of its generated
    dataset (``dataset``: syntheticLink or syntheticMag), short training and evaluation."""
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / example).read_text())
    job["spec"]["dataset"][dataset]["scale"] = scale
    job["spec"]["linkPrediction"]["evaluation"].update(
        {"negatives": NEGATIVES, "hitsAt": HITS_AT, "maxPositives": MAX_POSITIVES}
    )
    job["spec"]["training"].update({"epochs": EPOCHS, "batchSize": 256})
    job["spec"].update(spec)
    return job


def run_link_job(tmp_path: Path, job: dict[str, Any], *, name: str) -> Result:
    """Run the job (named ``name``) and check the parts every link run shares; its result,
    for the rest."""
    run = _run(_write(tmp_path / "job.yaml", job), tmp_path / "data", tmp_path / "run")
    result = run.succeeded()
    assert result.epochs == EPOCHS
    assert result.test_accuracy is None
    assert result.test_link is not None
    assert result.val_link is not None
    assert set(result.test_link.hits) == {str(k) for k in HITS_AT}

    stats = json.loads((run.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == list(range(1, EPOCHS + 1))
    logs = {p.name for p in (run.run_dir / "logs").iterdir()}
    assert ("sampler-0.log" in logs) == (job["spec"]["samplers"]["replicas"] > 0)
    out = " ".join(run.proc.stdout.split())
    assert f"Succeeded: {name}" in out
    assert f"test ranking MRR {result.test_link.mrr:.4f}" in out
    return result
