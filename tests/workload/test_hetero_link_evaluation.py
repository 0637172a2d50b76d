"""Heterogeneous link ranking: two gloo ranks, each embedding its share of every node type
(full neighbourhood) and ranking its share of the edges, give exactly the figures of one
process ranking every edge of author__writes__paper against the same negatives."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_operator.local.ports import free_ports
from tests.support.hetero_link_ranking_peers import HITS_AT, evaluate_link_rank
from tests.support.ranks import spawn_ranks

pytestmark = pytest.mark.slow


def test_two_ranks_equal_one_process(tmp_path: Path) -> None:
    for world_size in (1, 2):  # spawned: a finished rank leaves through os._exit
        spawn_ranks(evaluate_link_rank, (world_size, free_ports(1)[0], str(tmp_path)), world_size)
    single = torch.load(tmp_path / "figures-1-0.pt")
    for rank in range(2):
        assert torch.load(tmp_path / f"figures-2-{rank}.pt") == single
    assert len(single) == 4
    for figures in single.values():
        assert figures["count"] == 61
        assert 0 < figures["mrr"] < 1, single
        assert set(figures) == {"mrr", "count"} | {f"hits@{k}" for k in HITS_AT}
