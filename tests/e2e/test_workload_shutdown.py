"""A peer lost at the end of the job: the others leave within the shutdown bound, non-zero.

Both final evaluations are full-neighbourhood (the trainers alone, over the store) and
there is no validation during training, so after the last training step no sampler is
asked for anything. Right after trainer 0 reports its last epoch (no process can have left
yet: leaving waits for trainer 0's result, written after both evaluations), sampler 0 is
stopped (stuck: SIGSTOP) or killed (gone: SIGKILL). Every trainer must exit with the
contract's internal-error code within ``DISTGNN_SHUTDOWN_TIMEOUT`` (plus the slack of a
loaded machine), naming the peer and the shutdown step it waited in, and the result
trainer 0 wrote must be intact.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_workload.data.synthetic import generate
from tests.e2e.test_workload_training import job_spec, result_of
from tests.e2e.workload_launcher import LocalWorkload

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SHUTDOWN_TIMEOUT_S = 3.0
# Past the shutdown timeout: the slack of a loaded machine, never a hang's minutes.
EXIT_BOUND_S = SHUTDOWN_TIMEOUT_S + 25.0
VICTIM = (c.Role.sampler, 0)


def _is_last_epoch(epochs: int) -> Callable[[c.ProgressEvent], bool]:
    def matches(e: c.ProgressEvent) -> bool:
        return e.stage == c.STAGE_EPOCH and e.metrics.get("epoch") == epochs and "loss" in e.metrics

    return matches


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGKILL], ids=["stuck", "gone"])
def test_a_peer_lost_at_shutdown_fails_the_others_in_bounded_time(
    tmp_path: Path, sig: signal.Signals
) -> None:
    spec = job_spec(
        **{
            "training.epochs": 2,
            "training.evalEvery": 0,
            "training.evaluation": {"test": "full", "validation": "full"},
            "partition.algorithm": "random",
        }
    )
    job = LocalWorkload(tmp_path, spec, contract={"shutdown_timeout_s": SHUTDOWN_TIMEOUT_S})
    assert spec.dataset.synthetic is not None
    job.write_partitions(generate(spec.dataset.synthetic))
    job.start_all()
    try:
        # Every process still runs when trainer 0 reports its last epoch.
        job.wait_for_progress(c.Role.trainer, 0, _is_last_epoch(spec.training.epochs), 200)
        assert all(job.poll(*key) is None for key in job.procs), job.logs()
        job.signal(*VICTIM, sig)
        others = {key: name for key, name in job.procs.items() if key != VICTIM}
        job.procs.clear()
        job.procs.update(others)
        codes = job.wait_all(EXIT_BOUND_S)
    finally:
        job.stop_all()
    # Every survivor exited within the bound (wait_all kills, -9/-15, whatever is left).
    trainers = {key: code for key, code in codes.items() if key[0] is c.Role.trainer}
    assert trainers == dict.fromkeys(trainers, c.EXIT_INTERNAL_ERROR), f"{codes}\n{job.logs()}"
    # Trainer 0 (the store's owner) waited for the peer; the others name it too, whether
    # their own wait ran out or the store went away with trainer 0 meanwhile.
    error = "shutdown step 'every member leaving' timed out waiting for sampler-0"
    assert error in job.stdout_of(c.Role.trainer, 0), job.logs()
    failed = [key for key, code in codes.items() if code == c.EXIT_INTERNAL_ERROR]
    # Sampler 1 leaves later than trainer 0 (it polls for the trainers' finish): its store
    # watchdog may see trainer 0 gone first, with the result written, and exit 0 then.
    sampler1 = codes[(c.Role.sampler, 1)]
    assert sampler1 == c.EXIT_INTERNAL_ERROR or (
        sampler1 == c.EXIT_OK and "the job is over" in job.stdout_of(c.Role.sampler, 1)
    ), f"{codes}\n{job.logs()}"
    for role, rank in failed:
        errors = [
            line
            for line in job.stdout_of(role, rank).splitlines()
            if line.startswith(f"distgnn {role.value}: internal error:")
        ]
        assert len(errors) == 1, job.logs()
        assert "shutdown step 'every member leaving'" in errors[0], job.logs()
        assert "sampler-0" in errors[0], job.logs()
    result = result_of(job)
    assert result.job_uid == job.uid
    assert result.epochs == 2
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85
