"""A typed job's feature exchange over real processes (gloo): one exchange per featured
node type, tables with owner maps, uneven phases, a rank lost in a phase
(``tests/support/typed_exchange_ranks.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.typed_exchange_ranks import BATCH, TYPES, owners, spawn_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(200)]


@pytest.mark.parametrize("world", [2, 3])
def test_typed_rows_equal_the_reference_over_one_exchange_per_type(
    tmp_path: Path, world: int
) -> None:
    codes = spawn_ranks(world, tmp_path)
    assert codes == [0] * world, "a rank failed or hung: a type's phase did not end"
    check_ranks(tmp_path, world)


def test_a_rank_lost_in_a_phase_fails_the_others_instead_of_hanging(tmp_path: Path) -> None:
    """Rank 2 starts its evaluation's rounds of both types and dies; its peers, still in
    their own evaluations' rounds (or serving until every rank is done), fail instead of
    waiting forever, and every row they had received was right."""
    codes = spawn_ranks(3, tmp_path, lost=2)
    assert codes[2] == 17
    assert codes[:2] == [3, 3], codes  # both failed, neither hung (the join's bound)
    for rank in range(2):
        s = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert s["train"]["wrong"] == 0
        assert s["train"]["batches"] == 3
        assert s.get("error"), s


@pytest.mark.gpu
def test_typed_exchanges_over_nccl_side_by_side(tmp_path: Path) -> None:
    """Two types' exchanges, each on a communicator and stream of its own, on 2 GPUs."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (gpu tier)")
    codes = spawn_ranks(2, tmp_path, cuda=True)
    assert codes == [0, 0], "a rank failed or hung: a type's phase did not end"
    check_ranks(tmp_path, 2)


def check_ranks(tmp_path: Path, world: int) -> None:
    """What every rank of a healthy run saved must hold (see the support module)."""
    saved = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(world)]
    for rank, s in enumerate(saved):
        assert s["exchanges"] == len(TYPES)
        assert s["train"]["batches"] == 3
        assert s["eval"]["batches"] == 2 * rank
        assert s["train"]["rows"] == 3 * BATCH * len(TYPES)
        for phase in ("train", "eval"):
            assert s[phase]["wrong"] == 0, (rank, phase)
        for t, stats in s["stats"].items():
            if bool((owners(world)[t] == rank).all()):  # on 2 ranks, rank 0 owns every paper
                assert stats["lookups"] == stats["bytes_fetched"] == 0, (rank, t, stats)
                continue
            # some rows came over the exchange, and (but on rank 1) some from the cache
            assert stats["bytes_fetched"] > 0, (rank, t, stats)
            assert stats["lookups"] > 0, (rank, t, stats)
            if rank != 1:
                assert 0 < stats["hits"] < stats["lookups"], (rank, t, stats)
    # every rank took part in the same rounds of each type: a phase as long as its longest rank
    for t in TYPES:
        assert len({s["rounds"][t] for s in saved}) == 1, [s["rounds"] for s in saved]
