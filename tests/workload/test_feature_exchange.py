"""The trainers' feature exchange over real processes (gloo): rows equal to the replicated
table, uneven phases, and a rank lost at the end (``tests/support/exchange_ranks.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_workload.partition import PartitionStore
from tests.support.exchange_ranks import check_ranks, spawn_ranks, write_store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    return write_store(tmp_path_factory.mktemp("exchange") / "p")


@pytest.mark.parametrize("world", [2, 3, 4])
def test_rows_equal_the_replicated_table_with_uneven_phases(
    store: PartitionStore, tmp_path: Path, world: int
) -> None:
    codes = spawn_ranks(world, store, tmp_path)
    assert codes == [0] * world
    check_ranks(tmp_path, world)


def test_tiered_tables_serve_their_peers_rows_from_both_tiers(
    store: PartitionStore, tmp_path: Path
) -> None:
    """A GPU budget below each rank's table: the rows a rank receives still equal the
    replicated table's, whichever tier of its peer they were read from."""
    codes = spawn_ranks(2, store, tmp_path, tiered=True)
    assert codes == [0, 0]
    check_ranks(tmp_path, 2, tiered=True)


def test_a_rank_lost_at_the_end_fails_the_others_instead_of_hanging(
    store: PartitionStore, tmp_path: Path
) -> None:
    codes = spawn_ranks(3, store, tmp_path, lost=2)
    assert codes[2] == 17
    assert codes[:2] == [3, 3]  # both failed, neither hung (join's bound)
    for rank in range(2):
        s = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert s["train"]["wrong"] == 0
        assert s.get("error"), s
