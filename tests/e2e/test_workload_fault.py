"""A trainer killed mid-training: the gang stops, restarts, resumes from the checkpoint.

As on Kubernetes: the killed trainer's peers notice and exit non-zero (trainer 0's store
goes away, gloo loses its peer), the harness recreates every trainer and restarts every
sampler that exited, as the operator's gang restart and the StatefulSet would, and the
job completes with the total epoch count.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from distgnn_api import contract as c
from tests.e2e.test_workload_training import finish, job_spec, result_of, start_job
from tests.e2e.workload_launcher import LocalWorkload

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


def _checkpointed_epochs(run_dir: Path) -> int:
    latest = run_dir / c.CHECKPOINT_DIR / "latest.json"
    try:
        return int(json.loads(latest.read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


def _kill_and_check_the_gang_fails(job: LocalWorkload, victim: int, after: int, epochs: int) -> int:
    """Once more than ``after`` epochs are checkpointed, SIGKILL trainer ``victim``; every
    other process must notice and fail. The checkpointed epochs at the kill."""
    try:
        deadline = time.monotonic() + 180
        while _checkpointed_epochs(job.run_dir) <= after:
            assert time.monotonic() < deadline, job.logs()
            assert all(job.poll(*key) is None for key in job.procs), job.logs()
            time.sleep(0.05)
        job.signal(c.Role.trainer, victim, signal.SIGKILL)
        killed_after = _checkpointed_epochs(job.run_dir)
        assert killed_after < epochs
        codes = job.wait_all(90)
    finally:
        job.stop_all()
    assert codes[(c.Role.trainer, victim)] == -signal.SIGKILL
    survivors = {k: v for k, v in codes.items() if k != (c.Role.trainer, victim)}
    # Every other process noticed and failed, so that the whole gang restarts.
    assert all(code == c.EXIT_INTERNAL_ERROR for code in survivors.values()), (
        f"{codes}\n{job.logs()}"
    )
    assert not (job.run_dir / c.RESULT_FILE).exists()
    return killed_after


def _resumed_at(job: LocalWorkload) -> list[int]:
    """The epoch each trainer's log says it resumed from, in order, over both ranks."""
    return [
        int(line.split("resumed from epoch-")[1].split(".")[0])
        for rank in range(2)
        for line in job.stdout_of(c.Role.trainer, rank).splitlines()
        if "resumed from epoch-" in line
    ]


@pytest.mark.parametrize(
    ("victims", "samplers"),
    [((1, 0), 2), ((1,), 0)],
    ids=["server-client-1-then-0", "worker-1"],
)
def test_a_killed_trainer_resumes_from_the_last_checkpoint(
    tmp_path: Path, victims: tuple[int, ...], samplers: int
) -> None:
    """Also in worker mode with partitioned features, where the survivor waits in the
    feature exchange's collectives when its peer dies (gloo fails them at once). In
    server-client mode trainer 1 is killed, and then, in the resumed gang, trainer 0."""
    epochs = 6
    spec = job_spec(
        **{
            "dataset.synthetic.numNodes": 12000,
            "dataset.synthetic.numEdges": 120000,
            "samplers.replicas": samplers,
            "training.epochs": epochs,
            "training.evalEvery": 0 if samplers else 1,
            "partition.algorithm": "random",
        }
    )
    job = start_job(tmp_path, spec)
    kills = [1]  # the first kill waits for two checkpointed epochs
    for victim in victims:
        kills.append(_kill_and_check_the_gang_fails(job, victim, kills[-1], epochs))
        job.procs.clear()
        job.start_all()
    kills = kills[1:]
    finish(job)
    result = result_of(job)
    assert result.epochs == epochs
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85
    resumed = _resumed_at(job)
    assert len(resumed) == 2 * len(victims), job.logs()
    for restart, killed_after in enumerate(kills):
        # each restart's line in both ranks' logs (appended to on every restart): the
        # same checkpoint, at least as late as the one written before the kill
        at = {resumed[restart], resumed[len(victims) + restart]}
        assert len(at) == 1, resumed
        assert at.pop() >= killed_after, (resumed, kills)
    stats = json.loads((job.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == list(range(1, epochs + 1))
