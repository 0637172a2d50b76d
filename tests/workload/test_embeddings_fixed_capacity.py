"""The fixed-capacity embedding path (padded distinct ids, device-side counts, padded
row-sparse updates) equals the compact ``torch.unique`` path bit for bit: losses, rows,
optimizer state and step counts at every step, on one rank and on two gloo ranks that own
each other's rows, with fp32 and bf16 rows, Adam and Adagrad, and across a resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_workload.embeddings import (
    LookupRangeError,
    RowExchange,
    RowOwnership,
    RowSparseAdam,
    ShardedEmbedding,
)
from distgnn_workload.embeddings.distinct import repeat_last, sorted_distinct
from tests.support import embedding_equality as eq
from tests.support.embedding_ranks import SIZES


@pytest.mark.parametrize("kind", ["adam", "adagrad"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_one_rank_equals_the_compact_path(tmp_path: Path, kind: str, bf16: bool) -> None:
    record = eq.compare_paths(0, 1, torch.device("cpu"), None, tmp_path / "run", kind, bf16)
    eq.check_equal(record)
    stats, looked_up = record["stats"]
    # one rank: nothing to exchange; on CPU only the ids' range check reads (at once)
    assert record["read_backs"] == (len(SIZES), len(SIZES))
    assert stats["ids_sent"] == stats["rows_sent"] == stats["bytes_sent"] == 0
    assert stats["rows_updated"] > 0
    assert looked_up[0] > 0


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "bf16"), [("adam", False), ("adagrad", True)])
def test_two_ranks_equal_the_compact_path(tmp_path: Path, kind: str, bf16: bool) -> None:
    ranks = eq.run_two_ranks(tmp_path, kind, bf16)
    for record in ranks:
        eq.check_equal(record)
        stats, _ = record["stats"]
        assert stats["ids_sent"] > 0, "no row came from the other rank"
        # one read-back of the counts (sent and received: two host lists) for all tables
        assert record["read_backs"] == (2, 2 * len(SIZES))


@pytest.mark.parametrize("world", [1, 2])
def test_padded_lookups_equal_the_compact_path(tmp_path: Path, world: int) -> None:
    """What a captured step looks up (fixed buffers of ids with stale ids past the real
    ones; with two ranks, blocks of fixed size and no counts) trains as the compact path
    does, bit for bit; the stale ids (some out of range) touch nothing and raise nothing."""
    if world == 1:
        device = torch.device("cpu")
        ranks = [eq.compare_paths(0, 1, device, None, tmp_path / "run", "adam", False, True)]
    else:
        ranks = eq.run_two_ranks(tmp_path, "adam", True, padded=True)
    for record in ranks:
        eq.check_equal(record)
        stats, looked_up = record["stats"]
        assert stats["rows_updated"] > 0
        assert looked_up[0] > 0
        if world == 2:
            assert stats["ids_sent"] > 0, "no row came from the other rank"
            assert stats["grad_rows_sent"] > 0, "no row gradient went to the other rank"


def test_sorted_distinct_is_unique_at_a_fixed_capacity() -> None:
    g = torch.Generator().manual_seed(0)
    for n, high in [(1, 1), (7, 3), (50, 1000), (64, 8)]:
        ids = torch.randint(0, high, (n,), generator=g)
        d = sorted_distinct(ids)
        want, inverse = torch.unique(ids, return_inverse=True)
        count = int(d.count)
        assert d.ids.numel() == n
        assert count == want.numel()
        assert torch.equal(d.ids[:count], want)
        assert torch.equal(d.inverse, inverse)
        assert bool((d.ids[count:] == want[-1]).all())
        valid = torch.rand(n, generator=g) < 0.5
        d = sorted_distinct(ids, valid=valid, sentinel=high)
        want = torch.unique(ids[valid])
        count = int(d.count)
        assert torch.equal(d.ids[:count], want)
        assert torch.equal(d.ids[d.inverse[valid]], ids[valid])
        assert bool((d.inverse[~valid] >= count).all())


def test_repeat_last_fills_an_empty_count() -> None:
    values = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(repeat_last(values, torch.tensor(2)), values[[0, 1, 1, 1]])
    assert torch.equal(repeat_last(values, torch.tensor(0), fill=-1), torch.full((4, 3), -1.0))


def test_a_deferred_range_error_is_raised_when_counts_are_read_and_trains_no_row() -> None:
    """On GPUs a one-rank lookup leaves its range check on the device: the error comes when
    the counts are read, and the ids out of range neither read nor update any row."""
    table = ShardedEmbedding(RowOwnership.single("field", 10), 4, RowExchange.local())
    table.defer_checks = True
    opt = RowSparseAdam([table], lr=0.1)
    before = table.weight.clone()
    out = table.lookup(torch.tensor([3, 12, 3, -1]))
    out.sum().backward()  # type: ignore[no-untyped-call]
    opt.step()
    changed = (table.weight != before).any(dim=1).nonzero().flatten().tolist()
    assert changed == [3]
    assert torch.equal(out[0].detach(), out[2].detach())
    with pytest.raises(LookupRangeError, match=r"'field': 2 ids .* outside 0\.\.9"):
        table.take_counts()
    assert table.take_counts() == (1, 0)
    table.lookup(torch.tensor([1, 2]))
    assert table.take_counts() == (2, 0)
