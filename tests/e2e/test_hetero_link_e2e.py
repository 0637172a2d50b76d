"""`distgnn run` of a heterogeneous link-prediction job end to end (author__writes__paper
of a small syntheticMag): the real CLI, partition Job, samplers and trainers on gloo, in
server-client mode (two sampler servers, two trainers) and in worker mode (two trainers).
The test edges rank against fixed negative papers well above chance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.link_e2e import MAX_POSITIVES, RANDOM_MRR, reduced_link_job, run_link_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]


@pytest.mark.parametrize(
    "samplers",
    [{"replicas": 2, "gpusPerPod": 0, "workers": 1}, {"replicas": 0}],
    ids=["server-client", "worker"],
)
def test_hetero_link_runs_end_to_end(tmp_path: Path, samplers: dict[str, Any]) -> None:
    job = reduced_link_job("quickstart-hetero-link.yaml", "syntheticMag", 0.005, samplers=samplers)
    result = run_link_job(tmp_path, job, name="quickstart-hetero-link")
    assert result.test_link is not None
    assert 0 < result.test_link.positives <= MAX_POSITIVES
    assert result.test_link.mrr > 1.5 * RANDOM_MRR, (result, RANDOM_MRR)
