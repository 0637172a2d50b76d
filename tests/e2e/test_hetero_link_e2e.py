"""`distgnn run` of a heterogeneous link-prediction job end to end (author__writes__paper
of a small syntheticMag): the real CLI, partition Job, samplers and trainers on gloo, in
server-client mode (two sampler servers, two trainers) and in worker mode (two trainers).
In server-client mode the test edges rank against fixed negative papers well above chance;
in worker mode, with ``negatives: all``, against every paper. (Both kinds of negatives go
through one ranking path in either mode: ``rank_share``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig
from tests.support.link_e2e import MAX_POSITIVES, RANDOM_MRR, reduced_link_job, run_link_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

SCALE = 0.005


def test_hetero_link_runs_end_to_end_in_server_client_mode(tmp_path: Path) -> None:
    samplers = {"replicas": 2, "gpusPerPod": 0, "workers": 1}
    job = reduced_link_job("quickstart-hetero-link.yaml", "syntheticMag", SCALE, samplers=samplers)
    result = run_link_job(tmp_path, job, name="quickstart-hetero-link")
    assert result.test_link is not None
    assert 0 < result.test_link.positives <= MAX_POSITIVES
    assert result.test_link.mrr > 1.5 * RANDOM_MRR, (result, RANDOM_MRR)


def test_hetero_link_runs_in_worker_mode_and_ranks_against_every_destination_node(
    tmp_path: Path,
) -> None:
    """Worker mode with ``evaluation.negatives: all``: each held-out author__writes__paper
    edge ranks against every paper, and the model still ranks well above a random ranking of
    all of them (3,682 papers; its MRR was 5.7 times the random one's)."""
    job = reduced_link_job(
        "quickstart-hetero-link.yaml", "syntheticMag", SCALE, samplers={"replicas": 0}
    )
    job["spec"]["linkPrediction"]["evaluation"].update({"negatives": "all", "hitsAt": [1, 10]})
    result = run_link_job(tmp_path, job, name="quickstart-hetero-link")
    assert result.test_link is not None
    papers = SyntheticHeteroConfig(scale=SCALE).node_counts()["paper"]
    # a random ranking among all papers: the mean of 1/r over r = 1..papers
    random_all = sum(1 / r for r in range(1, papers + 1)) / papers
    assert 0 < result.test_link.positives <= MAX_POSITIVES
    assert result.test_link.mrr > 2 * random_all, (result, random_all, papers)
