"""`distgnn run` end to end: the real CLI running the real partition, sampler and trainer roles.

A reduced quickstart (the example, with a smaller graph and fewer epochs) runs through the
console script as a subprocess. The failure tests break the run for real: a corrupted
partition file, SIGINT to the CLI. After each run, no process of the job may be left.

The first run starts every role as a fresh interpreter, as ``distgnn run`` does by default;
the others fork them from the ``--preload`` zygote (seconds of CPU less per process).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api.contract import (
    PROGRESS_LINE_PREFIX,
    RESULT_FILE,
    SUCCESS_MARKER,
    PartitionFigures,
    Result,
    partition_dir,
    partition_key,
)
from distgnn_api.spec import parse_job
from tests.local.cli_command import distgnn_cli
from tests.local.process_table import processes_of_run, run_env

pytestmark = pytest.mark.e2e

QUICKSTART = Path(__file__).parents[2] / "manifests" / "examples" / "quickstart.yaml"
# The reduced graph still has a clear community signal; chance is 1/8.
MIN_TEST_ACCURACY = 0.7
RUN_TIMEOUT_S = 600


def _reduced_quickstart(**training: Any) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(QUICKSTART.read_text())
    job["spec"]["dataset"]["synthetic"].update({"numNodes": 5000, "numEdges": 50000})
    # Small batches: the reduced graph has 1000 training nodes.
    job["spec"]["training"].update({"epochs": 6, "batchSize": 64, **training})
    return job


def _write(path: Path, job: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(job))
    return path


@dataclass
class Run:
    uid: str
    proc: subprocess.CompletedProcess[str]
    run_dir: Path

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    def succeeded(self) -> Result:
        """Its result, once it is checked that the run exited 0, left no process of the job
        behind and wrote the result of this job."""
        assert self.proc.returncode == 0, self.output
        assert processes_of_run(self.uid) == []
        result = Result.model_validate_json((self.run_dir / RESULT_FILE).read_text())
        assert result.job_uid == self.uid
        return result


def _argv(job_file: Path, data_dir: Path, run_dir: Path, uid: str, preload: bool) -> list[str]:
    argv = [*distgnn_cli(), "run", str(job_file), "--data-dir", str(data_dir)]
    argv += ["--run-dir", str(run_dir), "--uid", uid, "--gpus", "0"]
    return [*argv, "--preload"] if preload else argv


def _run(job_file: Path, data_dir: Path, run_dir: Path, *, preload: bool = True) -> Run:
    """``distgnn run`` of the job to its end; ``preload`` forks the CPU roles from a zygote."""
    uid = str(uuid.uuid4())
    proc = subprocess.run(
        _argv(job_file, data_dir, run_dir, uid, preload),
        env=run_env(uid),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    return Run(uid, proc, run_dir)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def first_run(workdir: Path) -> Iterator[Run]:
    """The reduced quickstart from scratch: partition, one sampler, two trainers, each a
    fresh interpreter (no ``--preload``)."""
    job_file = _write(workdir / "job.yaml", _reduced_quickstart())
    run = _run(job_file, workdir / "data", workdir / "run-1", preload=False)
    yield run
    # Whatever happened, nothing of it may still run.
    assert processes_of_run(run.uid) == []


def test_quickstart_runs_end_to_end(first_run: Run, workdir: Path) -> None:
    assert first_run.proc.returncode == 0, first_run.output
    job = parse_job(_reduced_quickstart())
    assert (partition_dir(workdir / "data", partition_key(job.spec)) / SUCCESS_MARKER).exists()
    result = Result.model_validate_json((first_run.run_dir / RESULT_FILE).read_text())
    assert result.job_uid == first_run.uid
    assert result.epochs == job.spec.training.epochs
    assert result.test_accuracy is not None
    assert result.test_accuracy >= MIN_TEST_ACCURACY, result
    assert result.seeds_per_second > 0
    logs = sorted(p.name for p in (first_run.run_dir / "logs").iterdir())
    assert logs == [
        "partition-0.log",
        "partition-0.termination",
        "sampler-0.log",
        "trainer-0.log",
        "trainer-1.log",
    ]
    # The partition step's figures, as the operator reads them from a pod's termination message.
    figures = PartitionFigures.model_validate_json(
        (first_run.run_dir / "logs" / "partition-0.termination").read_text()
    )
    assert figures.num_partitions == job.spec.num_partitions
    assert figures.edge_cut > 0
    assert set(figures.step_seconds) == {"generate", "partition", "write", "probe"}
    # The summary tells where things are and what came out.
    out = first_run.proc.stdout
    assert "Succeeded: quickstart" in out
    assert f"test accuracy {result.test_accuracy:.4f}" in " ".join(out.split())
    assert str(first_run.run_dir / RESULT_FILE) in out
    assert processes_of_run(first_run.uid) == []


@pytest.mark.parametrize(
    ("samplers", "failing"),
    [
        (1, r"sampler-0"),  # the one sampler holds both partitions
        (0, r"trainer-[01]"),  # worker mode: the trainers hold the partitions
    ],
    ids=["sampler-mode", "worker-mode"],
)
def test_a_corrupted_partition_stops_the_run_and_names_the_process(
    first_run: Run, workdir: Path, samplers: int, failing: str
) -> None:
    """A process that cannot read its partition fails; the others are stopped, none is left."""
    assert first_run.proc.returncode == 0, first_run.output
    job = _reduced_quickstart()
    job["spec"]["samplers"]["replicas"] = samplers
    # Worker mode keeps the partition count, hence the content key: the store is reused.
    key = partition_key(parse_job(job).spec)
    assert key == partition_key(parse_job(_reduced_quickstart()).spec)
    data = workdir / f"data-corrupt-{samplers}"
    shutil.copytree(partition_dir(workdir / "data", key), partition_dir(data, key))
    features = partition_dir(data, key) / "part-1" / "features.npy"
    with open(features, "r+b") as f:
        f.truncate(features.stat().st_size // 2)
    job_file = _write(workdir / f"job-corrupt-{samplers}.yaml", job)
    run = _run(job_file, data, workdir / f"run-corrupt-{samplers}")
    assert run.proc.returncode != 0, run.output
    out = " ".join(run.proc.stdout.split())
    # The partition was complete, so the step was skipped, as in the cluster.
    assert "(complete: reused)" in out
    assert not (run.run_dir / "logs" / "partition-0.log").exists()
    failed = re.search(rf"Failed: ({failing}) exited with code [1-9]", out)
    assert failed, out
    assert "stopped the other processes" in out
    # The tail of its log, which says what was wrong, is shown.
    name = failed.group(1)
    log = (run.run_dir / "logs" / f"{name}.log").read_text().splitlines()
    last = next(line for line in reversed(log) if not line.startswith(PROGRESS_LINE_PREFIX))
    assert " ".join(last.split()) in out
    assert f"distgnn {name.split('-')[0]}:" in last
    assert not (run.run_dir / RESULT_FILE).exists()
    assert processes_of_run(run.uid) == []


def test_ctrl_c_stops_every_process_and_the_run_resumes(first_run: Run, workdir: Path) -> None:
    assert first_run.proc.returncode == 0, first_run.output
    epochs = 12  # training outlasts the interrupt, sent after the first checkpoint
    job_file = _write(workdir / "job-long.yaml", _reduced_quickstart(epochs=epochs))
    run_dir = workdir / "run-interrupted"
    uid = str(uuid.uuid4())
    argv = _argv(job_file, workdir / "data", run_dir, uid, preload=True)
    env = run_env(uid)
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        latest = run_dir / "checkpoints" / "latest.json"
        deadline = time.monotonic() + RUN_TIMEOUT_S
        # Interrupt once training is under way: the first checkpoint is written.
        while not latest.exists():
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # distgnn run, its zygote, sampler-0, trainer-0, trainer-1
        assert len(processes_of_run(uid)) >= 5
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT, out
    assert "Interrupted: stopping 3 processes" in out
    assert f"--uid {uid}" in out  # how to resume
    assert processes_of_run(uid) == []
    assert not (run_dir / RESULT_FILE).exists()

    # The same command with the same UID continues from the last checkpoint.
    resumed = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = Result.model_validate_json((run_dir / RESULT_FILE).read_text())
    assert (result.job_uid, result.epochs) == (uid, epochs)
    assert f"epoch {epochs}/{epochs} done" in resumed.stdout
    assert f"epoch 1/{epochs} done" not in resumed.stdout
    assert processes_of_run(uid) == []


def test_an_out_of_core_partition_trains(workdir: Path) -> None:
    """The store the out-of-core path writes serves the samplers and trainers as is."""
    job = _reduced_quickstart()
    job["spec"]["partition"] = {
        **job["spec"].get("partition", {}),
        "algorithm": "random",
        "outOfCore": "always",
    }
    job_file = _write(workdir / "job-ooc.yaml", job)
    run = _run(job_file, workdir / "data-ooc", workdir / "run-ooc")
    result = run.succeeded()
    spec = parse_job(job).spec
    meta = yaml.safe_load(
        (partition_dir(workdir / "data-ooc", partition_key(spec)) / "META.json").read_text()
    )
    assert meta["out_of_core"] is True
    assert meta["algorithm"] == "random"
    assert result.epochs == spec.training.epochs
    assert result.test_accuracy is not None
    assert result.test_accuracy >= MIN_TEST_ACCURACY, result
