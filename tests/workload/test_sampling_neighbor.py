"""NeighborSampler against a slow pure-Python reference, and its sampling distribution."""

from __future__ import annotations

import math
import pickle
from collections import Counter
from itertools import combinations
from typing import Any

import pytest
import torch

from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.sampling import (
    HeteroNeighborSampler,
    HopBatch,
    NeighborSampler,
    csc_from_edge_index,
    uniform_subset_positions,
)
from tests.support.failed_capture import make_capture_fail

# Upper 0.1% points of the chi-square distribution (df -> value), from standard tables.
CHI2_CRIT_999 = {3: 16.266, 4: 18.467, 7: 24.322, 9: 27.877, 15: 37.697, 19: 43.820}


def chi2_crit_999(df: int) -> float:
    """Upper 0.1% point: the table, or the Wilson-Hilferty approximation for large df."""
    if df in CHI2_CRIT_999:
        return CHI2_CRIT_999[df]
    z = 3.0902
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def random_graph(num_nodes: int, num_edges: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A simple directed graph (no parallel edges) with skewed degrees, some of them zero."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(num_nodes, generator=g) ** 4 + 1e-3
    weights[: num_nodes // 10] = 0  # nodes with no in-edges
    dst = torch.multinomial(weights, num_edges, replacement=True, generator=g)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g)
    key = torch.unique(dst * num_nodes + src)
    edge_index = torch.stack([key % num_nodes, key // num_nodes])
    indptr, indices = csc_from_edge_index(edge_index, num_nodes)
    return indptr, indices


def adjacency(indptr: torch.Tensor, indices: torch.Tensor) -> list[list[int]]:
    ptr, idx = indptr.tolist(), indices.tolist()
    return [idx[ptr[v] : ptr[v + 1]] for v in range(len(ptr) - 1)]


def check_against_reference(
    hop: HopBatch, adj: list[list[int]], fanouts: list[int], seeds: list[int]
) -> None:
    """Replay the batch in pure Python: valid edges, exact counts, dedup, hop layout."""
    node_ids = hop.node_ids.tolist()
    src, dst = hop.edge_index.tolist()
    assert len(fanouts) == hop.num_hops
    assert hop.num_nodes_per_hop[0] == hop.num_seeds == len(seeds)
    assert node_ids[: len(seeds)] == seeds
    assert len(node_ids) == sum(hop.num_nodes_per_hop)
    assert len(set(node_ids)) == len(node_ids), "a node appears twice"
    assert len(src) == sum(hop.num_edges_per_hop)

    local = {gid: i for i, gid in enumerate(seeds)}
    next_id, lo, e0 = len(seeds), 0, 0
    ptr = [0]
    for h, fanout in enumerate(fanouts):
        hi = lo + hop.num_nodes_per_hop[h]
        e1 = e0 + hop.num_edges_per_hop[h]
        hop_dst, hop_src = dst[e0:e1], src[e0:e1]
        assert hop_dst == sorted(hop_dst), f"hop {h + 1} edges are not grouped by target"
        assert all(lo <= d < hi for d in hop_dst), f"hop {h + 1} targets are not hop {h} nodes"
        by_target: dict[int, list[int]] = {v: [] for v in range(lo, hi)}
        for s, d in zip(hop_src, hop_dst, strict=True):
            by_target[d].append(node_ids[s])
        for v in range(lo, hi):
            neighbours = adj[node_ids[v]]
            sampled = by_target[v]
            want = len(neighbours) if fanout < 0 else min(len(neighbours), fanout)
            assert len(sampled) == want, f"node {node_ids[v]}: {len(sampled)} edges, want {want}"
            assert not Counter(sampled) - Counter(neighbours), f"node {node_ids[v]}: bad neighbour"
            if fanout < 0 or len(neighbours) <= fanout:
                assert sampled == neighbours
            ptr.append(ptr[-1] + len(sampled))
        # relabelling: unseen nodes numbered in order of first appearance
        expected_new = []
        for gid in (node_ids[s] for s in hop_src):
            if gid not in local:
                local[gid] = next_id
                next_id += 1
                expected_new.append(gid)
        assert node_ids[hi : hi + len(expected_new)] == expected_new
        assert hop.num_nodes_per_hop[h + 1] == len(expected_new)
        assert hop_src == [local[node_ids[s]] for s in hop_src]
        lo, e0 = hi, e1
    assert hop.target_ptr is not None
    assert hop.target_ptr.tolist() == ptr


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize(
    ("fanouts", "seed"), [([3, 2], 0), ([15, 10, 5], 1), ([4, -1], 2), ([1, 1, 1, 1], 3)]
)
def test_sampler_matches_reference(fanouts: list[int], seed: int, static: bool) -> None:
    if static and -1 in fanouts:
        with pytest.raises(ValueError, match="bounded fanout"):
            NeighborSampler(
                torch.tensor([0, 0]),
                torch.tensor([], dtype=torch.int32),
                fanouts,
                static_shapes=True,
            )
        return
    indptr, indices = random_graph(300, 3000, seed)
    adj = adjacency(indptr, indices)
    sampler = NeighborSampler(
        indptr, indices, fanouts, device="cpu", seed=seed, static_shapes=static
    )
    perm = torch.randperm(300, generator=torch.Generator().manual_seed(seed))
    # the static execution pads the later, shorter batches to the first one's size
    for batch in (torch.arange(0, 300, 7), torch.tensor([5]), perm[:64]):
        hop = sampler.sample(batch)
        check_against_reference(hop, adj, fanouts, batch.tolist())
    assert bool((sampler._local == -1).all()), "the relabel table was not reset"


@pytest.mark.parametrize("static", [False, True])
def test_a_homogeneous_batch_is_the_typed_samplers_one_type_case(static: bool) -> None:
    """Same seed, same graph: the typed sampler over the one-type view draws the same batch,
    and ``HopBatch.typed()`` shows it without copies."""
    indptr, indices = random_graph(300, 3000, seed=4)
    one = NeighborSampler(indptr, indices, [5, 3], seed=3, static_shapes=static)
    typed = HeteroNeighborSampler(
        {EDGE_TYPE: (indptr, indices)},
        {NODE_TYPE: 300},
        [5, 3],
        seed_type=NODE_TYPE,
        seed=3,
        static_shapes=static,
    )
    seeds = torch.randperm(300, generator=torch.Generator().manual_seed(1))[:23]
    for _ in range(3):  # the random streams stay together over batches
        hop, want = one.sample(seeds), typed.sample(seeds)
        view = hop.typed()
        assert view.node_ids[NODE_TYPE].data_ptr() == hop.node_ids.data_ptr()
        assert view.num_nodes_per_hop == want.num_nodes_per_hop
        assert view.num_edges_per_hop == want.num_edges_per_hop
        assert torch.equal(view.node_ids[NODE_TYPE], want.node_ids[NODE_TYPE])
        assert torch.equal(view.edge_index[EDGE_TYPE], want.edge_index[EDGE_TYPE])
        assert torch.equal(view.target_ptr[EDGE_TYPE], want.target_ptr[EDGE_TYPE])
        num_src, num_dst, num_edges = hop.layer_sizes(0)
        sizes = ({NODE_TYPE: num_src}, {NODE_TYPE: num_dst}, {EDGE_TYPE: num_edges})
        assert view.layer_sizes(0) == sizes


def test_large_fanout_is_full_bfs() -> None:
    """With fanouts above every degree the result is deterministic: all neighbours."""
    indptr, indices = random_graph(200, 1500, 7)
    adj = adjacency(indptr, indices)
    max_deg = max(len(a) for a in adj)
    seeds = [11, 3, 150]
    a = NeighborSampler(indptr, indices, [max_deg, max_deg], device="cpu", seed=1).sample(
        torch.tensor(seeds)
    )
    b = NeighborSampler(indptr, indices, [-1, -1], device="cpu", seed=2).sample(torch.tensor(seeds))
    check_against_reference(a, adj, [max_deg, max_deg], seeds)
    assert torch.equal(a.node_ids, b.node_ids)
    assert torch.equal(a.edge_index, b.edge_index)


def test_same_seed_same_sample_and_numpy_input() -> None:
    indptr, indices = random_graph(200, 2000, 3)
    seeds = torch.arange(0, 200, 3)
    a = NeighborSampler(indptr.numpy(), indices.numpy(), [5, 5], device="cpu", seed=9)
    b = NeighborSampler(indptr, indices, [5, 5], device="cpu", seed=9)
    ha, hb = a.sample(seeds), b.sample(seeds)
    assert torch.equal(ha.node_ids, hb.node_ids)
    assert torch.equal(ha.edge_index, hb.edge_index)
    c = pickle.loads(pickle.dumps(a))
    assert torch.equal(c.sample(seeds).edge_index, a.sample(seeds).edge_index)


def test_isolated_seeds_and_empty_hops() -> None:
    indptr = torch.tensor([0, 0, 1, 1])  # node 1 <- node 2; nodes 0 and 2 have no in-edges
    indices = torch.tensor([2], dtype=torch.int32)
    hop = NeighborSampler(indptr, indices, [2, 2], device="cpu").sample(torch.tensor([0, 1]))
    assert hop.node_ids.tolist() == [0, 1, 2]
    assert hop.num_nodes_per_hop == [2, 1, 0]
    assert hop.num_edges_per_hop == [1, 0]
    assert hop.edge_index.tolist() == [[2], [1]]
    assert hop.layer_sizes(0) == (3, 3, 1)
    assert hop.layer_sizes(1) == (3, 2, 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"indptr": torch.tensor([0, 2, 1, 2]), "indices": torch.tensor([0, 1])}, "non-decreasing"),
        ({"indptr": torch.tensor([0, 1, 3]), "indices": torch.tensor([0, 1])}, "end at len"),
        ({"fanouts": [2, 0]}, "fanouts"),
        ({"indices": torch.tensor([0.0, 1.0])}, "int32 or int64"),
    ],
)
def test_bad_input_is_named(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {
        "indptr": torch.tensor([0, 1, 2]),
        "indices": torch.tensor([1, 0]),
        "fanouts": [2],
    }
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError), match=match):
        NeighborSampler(args["indptr"], args["indices"], args["fanouts"], device="cpu")


def test_out_of_range_seed_is_rejected() -> None:
    sampler = NeighborSampler(torch.tensor([0, 1, 2]), torch.tensor([1, 0]), [1], device="cpu")
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        sampler.sample(torch.tensor([0, 2]))


def star_sampler(
    degree: int, fanout: int, seed: int, device: str, static: bool | None = None
) -> NeighborSampler:
    """Node 0 with in-neighbours 1..degree."""
    indptr = torch.zeros(degree + 2, dtype=torch.int64)
    indptr[1:] = degree
    indices = torch.arange(1, degree + 1, dtype=torch.int32)
    return NeighborSampler(
        indptr, indices, [fanout], device=device, seed=seed, static_shapes=static
    )


def sampled_sets(sampler: NeighborSampler, trials: int) -> torch.Tensor:
    """``[trials, fanout]`` neighbour ids drawn for node 0, one independent draw per row."""
    hop = sampler.sample(torch.zeros(trials, dtype=torch.int64))
    fanout = sampler.fanouts[0]
    assert hop.num_edges_per_hop == [trials * fanout]
    rows = hop.edge_index[1].view(trials, fanout)
    # duplicate seeds share one table slot; every row is still one draw for node 0
    assert bool((rows == rows[:, :1]).all())
    ids: torch.Tensor = hop.node_ids[hop.edge_index[0]].view(trials, fanout).cpu()
    return ids


@pytest.mark.parametrize(
    ("degree", "fanout", "static"),
    [
        (6, 3, False),
        (5, 4, False),
        (16, 15, False),
        (10, 9, False),
        (8, 1, False),
        (6, 3, True),
        (16, 15, True),
    ],
)
def test_subset_distribution_is_uniform(degree: int, fanout: int, static: bool) -> None:
    """Every k-subset of the neighbourhood is equally likely (chi-square, p = 0.001)."""
    trials = 20_000
    ids = sampled_sets(
        star_sampler(degree, fanout, seed=degree * 100 + fanout, device="cpu", static=static),
        trials,
    )
    assert bool(ids.sort(1).values.diff(dim=1).ne(0).all()), "a neighbour was picked twice"
    masks = (1 << (ids - 1)).sum(1)
    subsets = [sum(1 << (i - 1) for i in c) for c in combinations(range(1, degree + 1), fanout)]
    counts = Counter(masks.tolist())
    assert set(counts) <= set(subsets)
    expected = trials / len(subsets)
    stat = sum((counts.get(s, 0) - expected) ** 2 / expected for s in subsets)
    assert stat < chi2_crit_999(len(subsets) - 1), (
        f"chi-square {stat:.1f} over {len(subsets)} subsets"
    )


@pytest.mark.parametrize(("degree", "fanout"), [(20, 5), (1000, 15)])
def test_inclusion_frequencies_are_uniform(degree: int, fanout: int) -> None:
    """Each neighbour is included with probability k/d.

    Inclusion counts of k-of-d sampling are negatively correlated; Pearson's statistic
    divided by (1 - k/d) * d / (d - 1) is chi-square with d - 1 degrees of freedom.
    """
    trials = 20_000 if degree < 100 else 4_000
    ids = sampled_sets(star_sampler(degree, fanout, seed=degree, device="cpu"), trials)
    counts = torch.bincount(ids.reshape(-1) - 1, minlength=degree).double()
    p = fanout / degree
    expected = trials * p
    stat = float(((counts - expected) ** 2 / expected).sum()) / ((1 - p) * degree / (degree - 1))
    assert stat < chi2_crit_999(degree - 1), f"chi-square {stat:.1f} with {degree - 1} df"


def test_uniform_subset_positions_rows_are_distinct_and_in_range() -> None:
    g = torch.Generator().manual_seed(5)
    deg = torch.tensor([0, 1, 4, 5, 6, 7, 50, 10_000])
    pos, valid = uniform_subset_positions(deg, 5, g)
    for r, d in enumerate(deg.tolist()):
        picked = pos[r][valid[r]].tolist()
        assert len(picked) == min(d, 5)
        assert len(set(picked)) == len(picked)
        assert all(0 <= q < d for q in picked)


@pytest.mark.gpu
def test_gpu_sampler_matches_reference_and_is_uniform() -> None:
    indptr, indices = random_graph(400, 5000, 11)
    adj = adjacency(indptr, indices)
    seeds = torch.randperm(400, generator=torch.Generator().manual_seed(0))[:100]
    for static in (False, True):
        sampler = NeighborSampler(
            indptr, indices, [15, 10, 5], device="cuda", seed=1, static_shapes=static
        )
        for batch in (seeds, seeds[:37], seeds):  # a short batch replays the padded graph
            hop = sampler.sample(batch).to("cpu")
            check_against_reference(hop, adj, [15, 10, 5], batch.tolist())
        assert bool((sampler._local == -1).all())
        ids = sampled_sets(star_sampler(6, 3, seed=3, device="cuda", static=static), 20_000)
        counts = Counter((1 << (ids - 1)).sum(1).tolist())
        assert len(counts) == 20
        stat = sum((c - 1000) ** 2 / 1000 for c in counts.values())
        assert stat < chi2_crit_999(19)


def _launched_equal_sampled(device: str, static: bool) -> None:
    """Batches launched several ahead, then finished, equal those sampled one by one from
    the same stream: each launch owns its outputs, whatever the next replay refills."""
    indptr, indices = random_graph(400, 5000, 12)
    adj = adjacency(indptr, indices)
    perm = torch.randperm(400, generator=torch.Generator().manual_seed(1))
    batches = [perm[:64], perm[64:128], perm[128:150], perm[:64]]  # a short one, padded

    def sampler() -> NeighborSampler:
        return NeighborSampler(
            indptr, indices, [15, 10, 5], device=device, seed=5, static_shapes=static
        )

    one_by_one = sampler()
    expected = [one_by_one.sample(b).to("cpu") for b in batches]
    ahead = sampler()
    launched = [ahead.launch(b) for b in batches]  # all queued before any is cut
    got = [ahead.finish(x).to("cpu") for x in launched]
    for b, e, g in zip(batches, expected, got, strict=True):
        check_against_reference(g, adj, [15, 10, 5], b.tolist())
        assert g.num_nodes_per_hop == e.num_nodes_per_hop
        assert g.num_edges_per_hop == e.num_edges_per_hop
        for name in ("node_ids", "edge_index", "target_ptr"):
            assert torch.equal(getattr(g, name), getattr(e, name)), name
    assert bool((ahead._local == -1).all()), "the relabel table was not reset"


@pytest.mark.parametrize("static", [False, True])
def test_launched_batches_equal_those_sampled_one_by_one(static: bool) -> None:
    _launched_equal_sampled("cpu", static)


@pytest.mark.gpu
def test_launched_batches_on_a_gpu_own_their_outputs() -> None:
    """With CUDA graphs, every replay refills the same buffers: a launch copies them out."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (gpu tier)")
    _launched_equal_sampled("cuda", True)


def test_failed_graph_capture_falls_back_to_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    indptr, indices = random_graph(300, 3000, 4)
    sampler = make_capture_fail(
        NeighborSampler(indptr, indices, [4, 3], device="cpu", static_shapes=True), monkeypatch
    )
    seeds = torch.arange(0, 300, 5)
    with pytest.warns(UserWarning, match="falling back to the dynamic execution"):
        hop = sampler.sample(seeds)
    assert not sampler.static_shapes
    assert not sampler.cuda_graph
    check_against_reference(hop, adjacency(indptr, indices), [4, 3], seeds.tolist())
