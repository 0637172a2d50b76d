"""On GPUs (device machine only): ``distgnn run`` itself on every example that asks for GPUs.

This is what a user runs first. Each example runs through the real CLI as a subprocess, as
written except for what a test machine cannot hold: a smaller graph (the OGB example gets
small files in OGB's raw format at its dataset path), 2 epochs with evaluation after each,
and no more trainer or sampler pods than there are GPUs. It must exit 0 within the bound,
write its result and evaluate every epoch.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from distgnn_api.contract import STAGE_EPOCH, Result, parse_progress_line
from distgnn_api.spec import SyntheticDataset, parse_job
from tests.local.cli_command import distgnn_cli

pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.timeout(700)]

EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"
EPOCHS = 2
RUN_BOUND_S = 600  # a hang at any step (partition, training, evaluation, shutdown) fails
GRAPH = {"numNodes": 60000, "numEdges": 600000, "numFeatures": 100, "numClasses": 8}
MIN_TEST_ACCURACY = 0.5  # the reduced graph has a clear community signal; chance is 1/8


def _gpu_examples() -> list[Any]:
    def wants_gpus(path: Path) -> bool:
        spec = yaml.safe_load(path.read_text())["spec"]
        return any(spec.get(role, {}).get("gpusPerPod", 0) > 0 for role in ("trainers", "samplers"))

    def param(path: Path) -> Any:
        if parse_job(yaml.safe_load(path.read_text())).spec.dataset.is_hetero:
            # No reduced heterogeneous dataset is written below, and the workload has no
            # loader for one: the example is validated and rendered by the other tiers.
            reason = "a heterogeneous example: the workload does not load typed graphs"
            return pytest.param(path, marks=pytest.mark.skip(reason=reason), id=path.stem)
        return pytest.param(path, id=path.stem)

    return [param(p) for p in sorted(EXAMPLES.glob("*.yaml")) if wants_gpus(p)]


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _write_ogb(root: Path, scheme: str) -> None:
    """A small learnable graph in OGB's raw format, where the example expects its dataset."""
    from distgnn_workload.data.graph import edge_pairs
    from distgnn_workload.data.ogb import write_ogb
    from distgnn_workload.data.synthetic import generate

    g = generate(SyntheticDataset.model_validate(GRAPH))
    pairs = edge_pairs(g.indptr, g.indices)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    write_ogb(
        root,
        pairs,
        g.x,
        g.y,
        {
            name: np.flatnonzero(mask)
            for name, mask in (("train", g.train_mask), ("val", g.val_mask), ("test", g.test_mask))
        },
        scheme=scheme,
    )


def _reduced(doc: dict[str, Any], gpus: int, data_dir: Path) -> dict[str, Any]:
    spec = doc["spec"]
    dataset = spec["dataset"]
    if "synthetic" in dataset:
        dataset["synthetic"] = {**(dataset["synthetic"] or {}), **GRAPH}
    elif "ogb" in dataset:
        _write_ogb(data_dir / dataset["ogb"]["path"], dataset["ogb"].get("splitScheme", "random"))
    else:
        pytest.fail(f"no reduced dataset for {sorted(dataset)}: extend this test")
    for role in ("trainers", "samplers"):
        pod = spec.setdefault(role, {})
        pod.pop("resources", None)
        if pod.get("replicas", 1) > gpus:
            pod["replicas"] = gpus
    spec.get("partition", {}).pop("resources", None)
    spec["training"].update({"epochs": EPOCHS, "evalEvery": 1})
    spec.pop("storage", None)
    return doc


@pytest.mark.parametrize("example", _gpu_examples())
def test_distgnn_run_trains_the_gpu_example(example: Path, tmp_path: Path) -> None:
    gpus = _gpu_count()
    if gpus == 0:
        pytest.skip("needs a CUDA device (gpu tier)")
    data_dir = tmp_path / "data"
    job = _reduced(yaml.safe_load(example.read_text()), gpus, data_dir)
    job_file = tmp_path / example.name
    job_file.write_text(yaml.safe_dump(job))
    run_dir = tmp_path / "run"
    uid = str(uuid.uuid4())
    argv = [*distgnn_cli(), "run", str(job_file), "--data-dir", str(data_dir)]
    argv += ["--run-dir", str(run_dir), "--uid", uid]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_BOUND_S, check=False
        )
    except subprocess.TimeoutExpired as err:
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted((run_dir / "logs").glob("*.log"))
        )
        pytest.fail(
            f"distgnn run {example.name} did not exit within {RUN_BOUND_S}s ({err})\n{logs}"
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    result = Result.model_validate_json((run_dir / "result.json").read_text())
    assert result.job_uid == uid
    assert result.epochs == EPOCHS
    assert result.test_accuracy >= MIN_TEST_ACCURACY, output
    assert result.elapsed_seconds <= time.monotonic() - started
    trainer0 = (run_dir / "logs" / "trainer-0.log").read_text(errors="replace").splitlines()
    events = [e for e in map(parse_progress_line, trainer0) if e is not None]
    # Each epoch but the last carries the validation accuracy of the evaluation after it;
    # the last epoch's evaluation is the final one, reported in the result.
    evaluated = {
        int(e.metrics["epoch"])
        for e in events
        if e.stage == STAGE_EPOCH and "val_accuracy" in e.metrics
    }
    assert evaluated == set(range(1, EPOCHS)), output
    assert result.val_accuracy is not None, output
    assert f"Succeeded: {job['metadata']['name']}" in proc.stdout
