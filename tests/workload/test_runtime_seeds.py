"""How seeds are split across trainer ranks: equal steps, full coverage, reproducible."""

from __future__ import annotations

import pytest
import torch

from distgnn_workload.runtime.seeds import (
    epoch_subset,
    eval_batches,
    holder_ranks,
    local_ranks,
    steps_per_epoch,
    train_batches,
)


def _holders(*sizes: int) -> list[torch.Tensor]:
    out, start = [], 0
    for n in sizes:
        out.append(torch.arange(start, start + n))
        start += 1000
    return out


def test_server_client_ranks_draw_from_every_holder_with_equal_steps() -> None:
    seeds = _holders(103, 58)
    ranks = holder_ranks(2, 3, worker_mode=False)
    plans = [train_batches(seeds, ranks, 3, r, 16, epoch=0, seed=1) for r in range(3)]
    steps = {len(p) for p in plans}
    assert steps == {steps_per_epoch(seeds, ranks, 3, 16)}
    seen = torch.cat([b for p in plans for _, b in p])
    assert set(seen.tolist()) == set(torch.cat(seeds).tolist())
    for plan in plans:
        for holder, batch in plan:
            assert bool(((batch >= holder * 1000) & (batch < holder * 1000 + 1000)).all())
            assert batch.numel() <= 16
        assert {h for h, _ in plan} == {0, 1}


def test_worker_mode_ranks_draw_only_from_their_pod_and_pad_to_equal_steps() -> None:
    seeds = _holders(200, 37)
    ranks = holder_ranks(2, 4, worker_mode=True, procs_per_pod=2)
    assert ranks == [[0, 1], [2, 3]]
    plans = [train_batches(seeds, ranks, 4, r, 10, epoch=3, seed=0) for r in range(4)]
    assert len({len(p) for p in plans}) == 1
    assert len(plans[0]) == 10  # ceil(100 / 10); pod 1's ranks repeat their share
    for r, plan in enumerate(plans):
        assert {h for h, _ in plan} == {r // 2}
    covered = torch.cat([b for p in plans for _, b in p])
    assert set(covered.tolist()) == set(torch.cat(seeds).tolist())


def test_epochs_shuffle_differently_but_reproducibly() -> None:
    seeds = _holders(64)
    ranks = holder_ranks(1, 2, worker_mode=False)
    a = train_batches(seeds, ranks, 2, 0, 8, epoch=0, seed=5)
    b = train_batches(seeds, ranks, 2, 0, 8, epoch=0, seed=5)
    c = train_batches(seeds, ranks, 2, 0, 8, epoch=1, seed=5)
    assert all(torch.equal(x, y) for (_, x), (_, y) in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for (_, x), (_, y) in zip(a, c, strict=True))


def test_eval_covers_each_seed_exactly_once() -> None:
    seeds = _holders(51, 0, 13)
    ranks = holder_ranks(3, 4, worker_mode=False)
    got = torch.cat([b for r in range(4) for _, b in eval_batches(seeds, ranks, r, 7)])
    assert sorted(got.tolist()) == sorted(torch.cat(seeds).tolist())


def test_a_rank_with_no_training_seeds_is_a_clear_error() -> None:
    seeds = _holders(40, 0)
    ranks = holder_ranks(2, 2, worker_mode=True)
    with pytest.raises(ValueError, match="no training seeds"):
        train_batches(seeds, ranks, 2, 1, 8, epoch=0, seed=0)


def test_locality_a_trainer_draws_only_from_the_sampler_on_its_own_gpu() -> None:
    samplers = [("node-a", "gpu-0"), ("node-a", "gpu-1")]
    trainers = [("node-a", "gpu-1"), ("node-a", "gpu-0")]
    assert local_ranks(samplers, trainers) == [[1], [0]]
    ranks = holder_ranks(2, 2, worker_mode=False, sampler_places=samplers, trainer_places=trainers)
    seeds = _holders(100, 100)
    for r in range(2):
        plan = train_batches(seeds, ranks, 2, r, 16, epoch=0, seed=1)
        assert {h for h, _ in plan} == {1 - r}


def test_locality_falls_back_to_the_node_then_spreads_remote_trainers() -> None:
    samplers = [("node-a", "gpu-0"), ("node-b", "gpu-9")]
    # trainer 0 shares node-a but not a GPU; trainers 1 and 2 have no sampler on their node
    trainers = [("node-a", "gpu-1"), ("node-c", "gpu-2"), ("node-c", "gpu-3")]
    # trainer 0 stays on its node; the remote ones go to the least-loaded samplers in turn
    assert local_ranks(samplers, trainers) == [[0, 2], [1]]


def test_locality_a_sampler_with_no_trainer_near_it_is_shared_by_all() -> None:
    samplers = [("node-a", "gpu-0"), ("node-b", "gpu-0")]
    trainers = [("node-a", "gpu-0"), ("node-a", "gpu-0")]
    ranks = local_ranks(samplers, trainers)
    assert ranks == [[0, 1], [0, 1]]
    seeds = _holders(64, 64)
    covered = (
        torch.cat([b for r in range(2) for _, b in eval_batches(seeds, ranks, r, 16)]).sort().values
    )
    assert torch.equal(covered, torch.cat(seeds).sort().values)


def test_an_epoch_subset_is_fresh_each_epoch_the_same_on_every_call_and_proportional() -> None:
    seeds = _holders(3000, 1000, 0)
    first = epoch_subset(seeds, 400, epoch=0, seed=7)
    again = epoch_subset(seeds, 400, epoch=0, seed=7)  # another rank computes the same
    second = epoch_subset(seeds, 400, epoch=1, seed=7)
    assert [len(p) for p in first] == [300, 100, 0]  # each holder its share
    for got, same, later, full in zip(first, again, second, seeds, strict=True):
        assert torch.equal(got, same)
        assert len(set(got.tolist())) == len(got)  # no seed twice
        assert set(got.tolist()) <= set(full.tolist())
        assert set(later.tolist()) <= set(full.tolist())
    assert not torch.equal(first[0], second[0])
    assert epoch_subset(seeds, None, epoch=0, seed=7) == seeds
    assert epoch_subset(seeds, 4000, epoch=3, seed=7) == seeds


def test_every_holder_with_seeds_keeps_one_and_the_ranks_still_agree_on_steps() -> None:
    seeds = _holders(1000, 3)
    subset = epoch_subset(seeds, 10, epoch=2, seed=0)
    assert [len(p) for p in subset] == [10, 1]
    ranks = holder_ranks(2, 2, worker_mode=True)
    plans = [train_batches(subset, ranks, 2, r, 4, epoch=2, seed=0) for r in range(2)]
    assert {len(p) for p in plans} == {steps_per_epoch(subset, ranks, 2, 4)} == {3}
