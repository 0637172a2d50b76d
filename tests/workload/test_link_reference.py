"""The plain-PyTorch link-prediction reference (tests/support/link_reference.py): its
sampler returns what uniform neighbour sampling should, its metrics are OGB's formula, and
trained on a store the partition Job wrote it learns: its MRR is far above the random
baseline of the same negatives."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from distgnn_api import contract as c
from distgnn_api.spec import parse_spec
from distgnn_workload.partition.link_job import partition_link
from tests.support.link_reference import ranking_metrics, sample_subgraph, train_reference

NEGATIVES = 100


def test_ranking_metrics_follow_ogbs_formula() -> None:
    pos = torch.tensor([0.9, 0.5, 0.1])
    neg = torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.6, 0.1], [0.2, 0.3, 0.4]])
    # ranks: 1; optimistic 1, pessimistic 2 (a tie) -> 2.5; 4
    m = ranking_metrics(pos, neg, [1, 3])
    assert m["mrr"] == pytest.approx((1 + 1 / 2.5 + 1 / 4) / 3)
    assert m["hits@1"] == pytest.approx(1 / 3)
    assert m["hits@3"] == pytest.approx(2 / 3)


def test_sampling_takes_up_to_fanout_distinct_neighbours_per_node() -> None:
    # A star 0 - {1..9}, and 1 - 10.
    src = [0] * 9 + [1]
    dst = [*list(range(1, 10)), 10]
    n = 11
    rows = torch.tensor(src + dst)
    cols = torch.tensor(dst + src)
    order = torch.argsort(rows * n + cols)
    rows, cols = rows[order], cols[order]
    indptr = torch.zeros(n + 1, dtype=torch.long)
    indptr[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
    gen = torch.Generator().manual_seed(0)
    nodes, ei = sample_subgraph(torch.tensor([0]), [4, 2], indptr, cols, gen)
    first = ei[:, ei[1] == 0]
    assert first.shape[1] == 4
    assert len(set(nodes[first[0]].tolist())) == 4
    assert nodes[0] == 0
    assert len(set(nodes.tolist())) == len(nodes)
    # Every sampled edge is an edge of the graph, neighbour -> node.
    edges = set(zip(rows.tolist(), cols.tolist(), strict=True))
    for a, b in ei.t().tolist():
        assert (int(nodes[b]), int(nodes[a])) in edges


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ref")
    spec = parse_spec(
        {
            "dataset": {"syntheticLink": {"scale": 0.001}},
            "partition": {"numPartitions": 2, "algorithm": "random"},
            "task": "linkPrediction",
            "linkPrediction": {"evaluation": {"negatives": NEGATIVES, "hitsAt": [1, 10]}},
        }
    )
    key = c.partition_key(spec)
    config = c.JobConfig.model_validate_json(c.job_config_json("ref", "default", "u", spec))
    with open(tmp / "out.txt", "w") as out:
        partition_link(tmp, c.partition_dir(tmp, key), config, out)
    return c.partition_dir(tmp, key)


@pytest.mark.slow
def test_the_reference_learns_far_above_random(store: Path) -> None:
    torch.set_num_threads(1)
    result = train_reference(
        store, hidden=64, fanouts=(10, 5), epochs=3, batch_size=512, lr=0.005, seed=0
    )
    # Random scores rank a positive uniformly among NEGATIVES + 1: MRR = H(101) / 101.
    random_mrr = sum(1 / k for k in range(1, NEGATIVES + 2)) / (NEGATIVES + 1)
    assert random_mrr == pytest.approx(0.0519, abs=1e-3)
    assert result["valid_mrr"] > 5 * random_mrr, result
    assert result["test_mrr"] > 5 * random_mrr, result
    assert result["test_hits@10"] > 0.5, result
    assert math.isfinite(result["loss"])
    assert result["loss"] < math.log(2)  # below the loss of guessing
