"""On GPUs (device machine only): ``distgnn run`` itself on every example that asks for GPUs.

This is what a user runs first. Each example runs through the real CLI as a subprocess, as
written except for what a test machine cannot hold (``gpu_examples.reduce_example``: a
smaller graph, a reduced ``syntheticMag`` for the heterogeneous ones, 2 epochs with
evaluation after each, no more pods than GPUs). It must exit 0 within the bound, write its
result, reach the accuracy (or, for link prediction, the test MRR) the reduced graph allows
and evaluate every epoch. CPU examples with no GPU counterpart run on GPUs too
(``gpu_examples.ON_GPUS``), in each of their modes.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from distgnn_api.contract import STAGE_EPOCH, Result, parse_progress_line
from tests.e2e.gpu_examples import (
    EPOCHS,
    gpu_runs,
    is_link,
    min_test_accuracy,
    min_test_mrr,
    on_gpus,
    reduce_example,
)
from tests.local.cli_command import distgnn_cli

pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.timeout(700)]

RUN_BOUND_S = 600  # a hang at any step (partition, training, evaluation, shutdown) fails


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _run_id(run: tuple[Path, str]) -> str:
    example, mode = run
    return example.stem if mode == "as-written" else f"{example.stem}-gpu-{mode}"


@pytest.mark.parametrize("run", gpu_runs(), ids=_run_id)
def test_distgnn_run_trains_the_gpu_example(run: tuple[Path, str], tmp_path: Path) -> None:
    example, mode = run
    gpus = _gpu_count()
    if gpus == 0:
        pytest.skip("needs a CUDA device (gpu tier)")
    data_dir = tmp_path / "data"
    doc = yaml.safe_load(example.read_text())
    if mode != "as-written":
        doc = on_gpus(doc, mode)
    job = reduce_example(doc, gpus, data_dir)
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
    link = is_link(job)
    if link:
        assert result.test_accuracy is None
        assert result.test_link is not None
        assert result.val_link is not None
        assert result.test_link.mrr > min_test_mrr(job), output
    else:
        assert result.test_accuracy is not None
        assert result.test_accuracy >= min_test_accuracy(job), output
    assert result.elapsed_seconds <= time.monotonic() - started
    trainer0 = (run_dir / "logs" / "trainer-0.log").read_text(errors="replace").splitlines()
    events = [e for e in map(parse_progress_line, trainer0) if e is not None]
    # Each epoch but the last carries the validation accuracy of the evaluation after it;
    # the last epoch's evaluation is the final one, reported in the result.
    figure = "val_mrr" if link else "val_accuracy"
    evaluated = {
        int(e.metrics["epoch"]) for e in events if e.stage == STAGE_EPOCH and figure in e.metrics
    }
    assert evaluated == set(range(1, EPOCHS)), output
    if not link:
        assert result.val_accuracy is not None, output
    assert f"Succeeded: {job['metadata']['name']}" in proc.stdout
