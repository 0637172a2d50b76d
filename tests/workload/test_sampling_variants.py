"""The sampler's opt-in kernel variants give the samples of the default ones: repeated draws
found by one sort (``uniform_subset.REPEATS_BY_SORT``) and a padded hop's invalid entries
spread over the relabel table (``relabel.SPREAD_PADDING``), alone and through the typed
static sampler, which leaves its tables clean either way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from distgnn_workload.sampling import HeteroNeighborSampler, relabel, uniform_subset
from distgnn_workload.sampling.relabel import first_seen
from tests.workload.hetero_graphs import NUM_NODES, same_hop, typed_graph

CUDA = pytest.param("cuda", marks=pytest.mark.gpu)


@contextmanager
def variants(on: bool) -> Iterator[None]:
    saved = (uniform_subset.REPEATS_BY_SORT, relabel.SPREAD_PADDING)
    uniform_subset.REPEATS_BY_SORT = relabel.SPREAD_PADDING = on
    try:
        yield
    finally:
        uniform_subset.REPEATS_BY_SORT, relabel.SPREAD_PADDING = saved


@pytest.mark.parametrize(("size", "count"), [(50, 400), (5_000, 3_000)])
def test_spread_padding_finds_the_same_first_appearances(size: int, count: int) -> None:
    """Half the entries invalid (pointing at the padding slot, the table's last), ids
    repeated, some already in the table; more entries than slots in the first case."""
    g = torch.Generator().manual_seed(count)
    pad = size - 1
    table = torch.full((size,), -1, dtype=torch.int32)
    table[torch.randperm(pad, generator=g)[: pad // 4]] = 7  # already in the batch
    valid = torch.rand(count, generator=g) < 0.5
    neighbours = torch.where(valid, torch.randint(0, pad, (count,), generator=g), pad)
    got = {}
    for spread in (False, True):
        t = table.clone()
        got[spread] = (first_seen(t, neighbours, valid, spread=spread), t)
    assert bool(got[False][0].any())
    assert torch.equal(got[True][0], got[False][0])
    assert torch.equal(got[True][1], got[False][1])


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_the_typed_static_sampler_samples_the_same_batches(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    _, csr = typed_graph(5)
    g = torch.Generator().manual_seed(5)
    batches = [torch.randperm(300, generator=g)[:n] for n in (48, 48, 17, 48)]
    sampled = {}
    for on in (False, True):
        with variants(on):
            sampler = HeteroNeighborSampler(
                csr, NUM_NODES, [15, 4], device=device, seed=5, static_shapes=True,
                seed_type="paper",
            )  # fmt: skip
            sampled[on] = [sampler.sample(seeds).to("cpu") for seeds in batches]
            assert all(bool((t == -1).all()) for t in sampler._local.values())
    for a, b in zip(sampled[False], sampled[True], strict=True):
        same_hop(a, b)
