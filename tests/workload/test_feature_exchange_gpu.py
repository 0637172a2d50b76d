"""On GPUs (device machine only): the trainers' feature exchange over NCCL on 2 GPUs, on
its own process group and CUDA stream, against the replicated table, with uneven phases
(``tests/support/exchange_ranks.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.exchange_ranks import check_ranks, spawn_ranks, write_store

pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.timeout(300)]


def test_two_gpus_exchange_rows_equal_to_the_replicated_table(tmp_path: Path) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    store = write_store(tmp_path / "store")
    out = tmp_path / "ranks"
    out.mkdir()
    codes = spawn_ranks(2, store, out, cuda=True)
    assert codes == [0, 0]
    check_ranks(out, 2)


def test_tiered_tables_exchange_over_nccl_rows_from_both_tiers(tmp_path: Path) -> None:
    """Pinned host tiers read in place (UVA) by the gathers that serve the peers."""
    world = min(torch.cuda.device_count(), 4)
    if world < 2:
        pytest.skip("needs 2 GPUs")
    store = write_store(tmp_path / "store")
    out = tmp_path / "ranks"
    out.mkdir()
    codes = spawn_ranks(world, store, out, cuda=True, tiered=True)
    assert codes == [0] * world
    check_ranks(out, world, tiered=True)
