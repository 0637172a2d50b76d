"""The sampler's opt-in kernel variants give the samples of the default ones: repeated draws
found by one sort (``uniform_subset.REPEATS_BY_SORT``; on a GPU also replayed from a CUDA
graph) and a padded hop's invalid entries spread over the relabel table
(``relabel.SPREAD_PADDING``), alone and through the typed static sampler, which leaves its
tables clean either way."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

from distgnn_workload.sampling import (
    HeteroNeighborSampler,
    relabel,
    uniform_subset,
    uniform_subset_positions,
)
from distgnn_workload.sampling.relabel import first_seen
from distgnn_workload.sampling.uniform_subset import repeated
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


@pytest.mark.parametrize(
    ("rows", "k", "span"), [(1, 2, 2), (7, 5, 3), (300, 25, 40), (64, 20, 10**9)]
)
def test_repeated_draws_by_sort_equal_the_pairwise_test(rows: int, k: int, span: int) -> None:
    """The two collision tests of the uniform subsets agree on every draw (ranges small
    enough that rows repeat draws, and one where they almost never do), and so do the
    subsets the sampler draws with each."""
    g = torch.Generator().manual_seed(rows * k)
    t = torch.randint(0, span, (rows, k), generator=g)
    t[0, -1] = t[0, 0]  # at least one repeat
    pairs = repeated(t, by_sort=False)
    assert bool(pairs[0, -1])
    assert torch.equal(repeated(t, by_sort=True), pairs)
    deg = torch.randint(0, 3 * k, (rows,), generator=g)
    draws = {}
    for on in (False, True):
        with variants(on):
            draws[on] = uniform_subset_positions(deg, k, torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(draws[False], draws[True], strict=True))


@pytest.mark.gpu
def test_repeated_draws_by_sort_on_the_gpu_also_from_a_cuda_graph() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    g = torch.Generator(device="cuda").manual_seed(0)
    first, second = (torch.randint(0, 40, (3072, 25), device="cuda", generator=g) for _ in "ab")
    assert torch.equal(repeated(first, by_sort=True), repeated(first, by_sort=False))
    static = first.clone()
    repeated(static, by_sort=True)  # warm-up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = repeated(static, by_sort=True)
    static.copy_(second)
    graph.replay()
    assert torch.equal(out, repeated(second, by_sort=False))


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
