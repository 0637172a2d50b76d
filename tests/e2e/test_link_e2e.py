"""`distgnn run` of a link-prediction job end to end: the real CLI, partition Job, samplers
and trainers on gloo, in server-client mode (one sampler server, two trainers) and in worker
mode (two trainers). The test edges are ranked against fixed negatives well above chance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.link_e2e import MAX_POSITIVES, RANDOM_MRR, reduced_link_job, run_link_job

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "samplers",
    [{"replicas": 1, "gpusPerPod": 0, "workers": 1}, {"replicas": 0}],
    ids=["server-client", "worker"],
)
def test_quickstart_link_runs_end_to_end(tmp_path: Path, samplers: dict[str, Any]) -> None:
    job = reduced_link_job("quickstart-link.yaml", "syntheticLink", 0.002, samplers=samplers)
    result = run_link_job(tmp_path, job, name="quickstart-link")
    assert result.test_link is not None
    assert result.test_link.positives == MAX_POSITIVES
    assert result.test_link.mrr > 2 * RANDOM_MRR, (result, RANDOM_MRR)
