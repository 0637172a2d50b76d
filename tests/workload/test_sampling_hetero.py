"""HeteroNeighborSampler: layout against a pure-Python replay, and its sampling distribution
per edge type (the chi-square checks of the homogeneous sampler, repeated per edge type)."""

from __future__ import annotations

import math
import pickle
from collections import Counter
from itertools import combinations
from typing import Any

import pytest
import torch

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling import (
    HeteroHopBatch,
    HeteroNeighborSampler,
    ReferenceHeteroSampler,
    SampledEdgesPerSeed,
)
from distgnn_workload.sampling.csr import Fanouts
from distgnn_workload.sampling.edges_per_seed import relative_differences
from distgnn_workload.sampling.static_sample import sample_static
from tests.support.failed_capture import make_capture_fail
from tests.workload.hetero_graphs import MAG_LIKE, NUM_NODES, check_batch, typed_graph

# Upper 0.1% points of the chi-square distribution (df -> value), from standard tables.
CHI2_CRIT_999 = {3: 16.266, 4: 18.467, 7: 24.322, 9: 27.877, 15: 37.697, 19: 43.820}

CUDA = pytest.param("cuda", marks=pytest.mark.gpu)
WRITES: EdgeType = ("author", "writes", "paper")
CITES: EdgeType = ("paper", "cites", "paper")
TOPIC: EdgeType = ("field", "rev_has_topic", "paper")


def chi2_crit_999(df: int) -> float:
    """Upper 0.1% point: the table, or the Wilson-Hilferty approximation for large df."""
    if df in CHI2_CRIT_999:
        return CHI2_CRIT_999[df]
    z = 3.0902
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def full_fanouts(fanouts: Any) -> dict[EdgeType, list[int]]:
    return dict(fanouts) if isinstance(fanouts, dict) else {et: list(fanouts) for et in MAG_LIKE}


FANOUT_CASES: list[Fanouts] = [
    [3, 2],
    [15, 10, 5],
    [1, 1, 1],
    {et: [4 if et[0] == "paper" else 2, 0 if et[2] == "paper" else 3] for et in MAG_LIKE},
    {et: [-1 if et[0] == "institution" else 3, -1] for et in MAG_LIKE},
]


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("case", range(len(FANOUT_CASES)))
def test_sampler_matches_python_replay(case: int, static: bool, device: str) -> None:
    fanouts = FANOUT_CASES[case]
    _, csr = typed_graph(case)
    bounded = all(k >= 0 for ks in full_fanouts(fanouts).values() for k in ks)
    if static and not bounded:
        with pytest.raises(ValueError, match="bounded fanouts"):
            HeteroNeighborSampler(csr, NUM_NODES, fanouts, static_shapes=True)
        return
    sampler = HeteroNeighborSampler(
        csr, NUM_NODES, fanouts, device=device, seed=case, static_shapes=static,
        return_edge_ids=True,
    )  # fmt: skip
    perm = torch.randperm(300, generator=torch.Generator().manual_seed(case))
    # the static execution pads the later, shorter batches to the first one's size
    for batch_seeds in (torch.arange(0, 300, 7), torch.tensor([5, 5, 9]), perm[:64]):
        batch = sampler.sample(batch_seeds, "paper").to("cpu")
        check_batch(batch, csr, full_fanouts(fanouts), batch_seeds.tolist(), "paper")
    # seeds of another type
    authors = torch.arange(0, 200, 11)
    batch = sampler.sample(authors, "author").to("cpu")
    check_batch(batch, csr, full_fanouts(fanouts), authors.tolist(), "author")
    assert all(bool((t == -1).all()) for t in sampler._local.values()), "table not reset"


@pytest.mark.parametrize("fanouts", [[3, 2], FANOUT_CASES[4]])
def test_reference_sampler_matches_python_replay(fanouts: Any) -> None:
    _, csr = typed_graph(1)
    sampler = ReferenceHeteroSampler(csr, NUM_NODES, fanouts, seed_type="paper", seed=3)
    for seeds in (torch.arange(0, 300, 5), torch.tensor([7, 7, 1])):
        check_batch(sampler.sample(seeds), csr, full_fanouts(fanouts), seeds.tolist(), "paper")


def test_layer_sizes_are_prefixes() -> None:
    _, csr = typed_graph(2)
    sampler = HeteroNeighborSampler(csr, NUM_NODES, [4, 3], seed_type="paper")
    batch = sampler.sample(torch.arange(0, 300, 9))
    num_src, num_dst, num_edges = batch.layer_sizes(1)  # the last layer: seeds only
    assert num_dst == {t: (batch.num_seeds if t == "paper" else 0) for t in NUM_NODES}
    assert num_src == {t: n[0] + n[1] for t, n in batch.num_nodes_per_hop.items()}
    assert num_edges == {et: e[0] for et, e in batch.num_edges_per_hop.items()}
    num_src, num_dst, num_edges = batch.layer_sizes(0)
    assert num_src == batch.num_nodes
    for et, n in num_edges.items():
        assert n == batch.edge_index[et].size(1)
        if n:
            assert int(batch.edge_index[et][1].max()) < num_dst[et[2]]
        assert batch.target_ptr[et].numel() == num_dst[et[2]] + 1
    for layer in (0, 1):  # a layer's bags are a prefix of target_ptr, over its edges
        _, num_dst, num_edges = batch.layer_sizes(layer)
        for et, n in num_edges.items():
            assert int(batch.target_ptr[et][num_dst[et[2]]]) == n
    with pytest.raises(ValueError, match="out of range"):
        batch.layer_sizes(2)


def test_same_seed_same_sample_pickle_and_numpy_input() -> None:
    _, csr = typed_graph(3)
    numpy_csr = {et: (p.numpy(), i.numpy()) for et, (p, i) in csr.items()}
    a = HeteroNeighborSampler(numpy_csr, NUM_NODES, [5, 5], seed_type="paper", seed=9)
    b = HeteroNeighborSampler(csr, NUM_NODES, [5, 5], seed_type="paper", seed=9)
    seeds = torch.arange(0, 300, 3)
    ha, hb = a.sample(seeds), b.sample(seeds)
    for et in MAG_LIKE:
        assert torch.equal(ha.edge_index[et], hb.edge_index[et])
    c = pickle.loads(pickle.dumps(a))
    hc, ha = c.sample(seeds), a.sample(seeds)
    assert all(torch.equal(hc.edge_index[et], ha.edge_index[et]) for et in MAG_LIKE)


def star(degrees: dict[EdgeType, tuple[int, int]]) -> tuple[dict[EdgeType, Any], dict[str, int]]:
    """Paper 0 with ``degree`` in-neighbours of each edge type: ids 1..deg (papers) or 0..deg-1."""
    num_nodes = {"paper": 1 + degrees[CITES][0], "author": degrees[WRITES][0]}
    num_nodes["field"] = degrees[TOPIC][0]
    csr = {}
    for et, (degree, _) in degrees.items():
        indptr = torch.zeros(num_nodes["paper"] + 1, dtype=torch.int64)
        indptr[1:] = degree
        first = 1 if et[0] == "paper" else 0
        csr[et] = (indptr, torch.arange(first, first + degree, dtype=torch.int32))
    return csr, num_nodes


def sampled_sets(
    degrees: dict[EdgeType, tuple[int, int]], trials: int, device: str, static: bool
) -> dict[EdgeType, torch.Tensor]:
    """Per edge type, ``[trials, min(deg, fanout)]`` neighbour positions (0-based) drawn for
    paper 0 by ``trials`` independent rows of one batch."""
    csr, num_nodes = star(degrees)
    fanouts = {et: [k] for et, (_, k) in degrees.items()}
    sampler = HeteroNeighborSampler(
        csr, num_nodes, fanouts, device=device, seed=sum(d for d, _ in degrees.values()),
        static_shapes=static, seed_type="paper",
    )  # fmt: skip
    batch = sampler.sample(torch.zeros(trials, dtype=torch.int64)).to("cpu")
    out = {}
    for et, (degree, fanout) in degrees.items():
        k = min(degree, fanout)
        assert batch.num_edges_per_hop[et] == [trials * k]
        rows = batch.edge_index[et][1].view(trials, k)
        assert torch.equal(rows, torch.arange(trials).unsqueeze(1).expand(trials, k))
        ids = batch.node_ids[et[0]][batch.edge_index[et][0]].view(trials, k)
        out[et] = ids - (1 if et[0] == "paper" else 0)
    return out


SUBSET_CASES = [
    {WRITES: (6, 3), CITES: (5, 4), TOPIC: (16, 15)},
    {WRITES: (8, 1), CITES: (10, 9), TOPIC: (4, 6)},
]


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("case", range(len(SUBSET_CASES)))
def test_subset_distribution_is_uniform_per_edge_type(case: int, static: bool, device: str) -> None:
    """Per edge type, every k-subset of the neighbourhood is equally likely (p = 0.001)."""
    trials = 20_000
    degrees = SUBSET_CASES[case]
    for et, ids in sampled_sets(degrees, trials, device, static).items():
        degree, fanout = degrees[et]
        k = min(degree, fanout)
        assert bool(ids.sort(1).values.diff(dim=1).ne(0).all()), f"{et}: picked twice"
        masks = (1 << ids).sum(1)
        subsets = [sum(1 << i for i in c) for c in combinations(range(degree), k)]
        counts = Counter(masks.tolist())
        assert set(counts) <= set(subsets), f"{et}: a position out of range"
        if len(subsets) == 1:  # degree <= fanout: every neighbour, every time
            continue
        expected = trials / len(subsets)
        stat = sum((counts.get(s, 0) - expected) ** 2 / expected for s in subsets)
        assert stat < chi2_crit_999(len(subsets) - 1), (
            f"{et}: chi-square {stat:.1f} over {len(subsets)} subsets"
        )


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("static", [False, True])
def test_inclusion_frequencies_are_uniform_per_edge_type(static: bool, device: str) -> None:
    """Per edge type, each neighbour is included with probability k/d.

    Inclusion counts of k-of-d sampling are negatively correlated; Pearson's statistic
    divided by (1 - k/d) * d / (d - 1) is chi-square with d - 1 degrees of freedom.
    """
    trials = 4_000
    degrees = {WRITES: (20, 5), CITES: (1000, 15), TOPIC: (40, 25)}
    for et, ids in sampled_sets(degrees, trials, device, static).items():
        degree, fanout = degrees[et]
        counts = torch.bincount(ids.reshape(-1), minlength=degree).double()
        p = fanout / degree
        expected = trials * p
        stat = float(((counts - expected) ** 2 / expected).sum()) / (
            (1 - p) * degree / (degree - 1)
        )
        assert stat < chi2_crit_999(degree - 1), f"{et}: chi-square {stat:.1f}"


def test_reference_sampler_is_uniform() -> None:
    csr, num_nodes = star({WRITES: (6, 3), CITES: (5, 4), TOPIC: (16, 15)})
    sampler = ReferenceHeteroSampler(csr, num_nodes, [3], seed_type="paper", seed=1)
    trials = 6_000
    batch = sampler.sample(torch.zeros(trials, dtype=torch.int64))
    ids = batch.node_ids["author"][batch.edge_index[WRITES][0]].view(trials, 3)
    counts = Counter((1 << ids).sum(1).tolist())
    assert len(counts) == 20
    stat = sum((c - trials / 20) ** 2 / (trials / 20) for c in counts.values())
    assert stat < chi2_crit_999(19)


@pytest.mark.parametrize(
    ("fanouts", "kwargs", "match"),
    [
        ({("paper", "sells", "author"): [2]}, {}, "paper__sells__author"),
        ({WRITES: [2]}, {}, "lack edge types"),
        ({et: [2] if et != CITES else [2, 2] for et in MAG_LIKE}, {}, "same number of hops"),
        ([2, -2], {}, "must be >= 0"),
        ([2], {"seed_type": "venue"}, "venue"),
    ],
)
def test_bad_fanouts_are_named(fanouts: Any, kwargs: dict[str, Any], match: str) -> None:
    _, csr = typed_graph(0)
    with pytest.raises(ValueError, match=match):
        HeteroNeighborSampler(csr, NUM_NODES, fanouts, **kwargs)


def test_bad_graphs_and_seeds_are_named() -> None:
    _, csr = typed_graph(0)
    short = dict(csr)
    short[CITES] = (csr[CITES][0][:-1], csr[CITES][1])
    with pytest.raises(ValueError, match=r"paper__cites__paper.*num_nodes\['paper'\] \+ 1"):
        HeteroNeighborSampler(short, NUM_NODES, [2])
    wide = dict(csr)
    wide[WRITES] = (csr[WRITES][0], csr[WRITES][1] + 150)
    with pytest.raises(ValueError, match=r"author__writes__paper.*'author' ids in \[0, 200\)"):
        HeteroNeighborSampler(wide, NUM_NODES, [2])
    with pytest.raises(ValueError, match="'field' is missing in num_nodes"):
        HeteroNeighborSampler(csr, {"paper": 300, "author": 200, "institution": 20}, [2])
    sampler = HeteroNeighborSampler(csr, NUM_NODES, [2])
    with pytest.raises(ValueError, match="no seed type"):
        sampler.sample(torch.tensor([0]))
    with pytest.raises(ValueError, match=r"'author' ids in \[0, 200\)"):
        sampler.sample(torch.tensor([0, 250]), "author")


def test_sampled_edges_per_seed() -> None:
    _, csr = typed_graph(4)
    ours, reference = SampledEdgesPerSeed(), SampledEdgesPerSeed()
    fast = HeteroNeighborSampler(csr, NUM_NODES, [4, 3], seed_type="paper", seed=1)
    slow = ReferenceHeteroSampler(csr, NUM_NODES, [4, 3], seed_type="paper", seed=2)
    seeds = torch.arange(300)
    for part in torch.split(seeds, 50):
        batch: HeteroHopBatch = fast.sample(part)
        ours.add_batch(batch)
        reference.add_batch(slow.sample(part))
    assert ours.seeds == 300
    per_seed = ours.per_seed()
    assert set(per_seed) == {"__".join(et) for et in MAG_LIKE}
    assert sum(per_seed.values()) == pytest.approx(ours.total_per_seed())
    # hop 1 is deterministic in count: min(deg, 4) per seed and edge type into paper
    first_hop = sum(min(int(csr[CITES][0][v + 1] - csr[CITES][0][v]), 4) for v in range(300))
    assert ours.edges[CITES] >= first_hop
    # two exact uniform samplers do the same work up to sampling noise (about 1% in total
    # here; up to several % for the small edge types)
    diffs = relative_differences(per_seed, reference.per_seed())
    assert max(diffs.values()) < 0.2, diffs
    total = reference.total_per_seed()
    assert abs(ours.total_per_seed() - total) / total < 0.06


def test_empty_seeds_give_an_empty_batch() -> None:
    _, csr = typed_graph(6)
    for static in (False, True):
        sampler = HeteroNeighborSampler(
            csr, NUM_NODES, [3, 2], seed_type="paper", static_shapes=static
        )
        batch = sampler.sample(torch.zeros(0, dtype=torch.int64))
        assert batch.num_nodes == dict.fromkeys(NUM_NODES, 0)
        assert batch.num_edges == 0
        assert all(p.tolist() == [0] for p in batch.target_ptr.values())


def test_failed_graph_capture_falls_back_to_dynamic(monkeypatch: pytest.MonkeyPatch) -> None:
    _, csr = typed_graph(7)
    sampler = make_capture_fail(
        HeteroNeighborSampler(csr, NUM_NODES, [4, 3], seed_type="paper", static_shapes=True),
        monkeypatch,
    )
    seeds = torch.arange(0, 300, 5)
    with pytest.warns(UserWarning, match="falling back to the dynamic execution"):
        batch = sampler.sample(seeds)
    assert not sampler.static_shapes
    assert not sampler.cuda_graph
    check_batch(batch, csr, full_fanouts([4, 3]), seeds.tolist(), "paper")


@pytest.mark.gpu
def test_gpu_graph_is_captured_once_per_capacity_and_replayed() -> None:
    _, csr = typed_graph(8)
    sampler = HeteroNeighborSampler(csr, NUM_NODES, [5, 4], seed_type="paper", device="cuda")
    assert sampler.static_shapes
    assert sampler.cuda_graph
    sampler.prepare(64)
    perm = torch.randperm(300, generator=torch.Generator().manual_seed(8))
    for size in (64, 17, 64, 1):
        seeds = perm[:size]
        check_batch(
            sampler.sample(seeds).to("cpu"), csr, full_fanouts([5, 4]), seeds.tolist(), "paper"
        )
    assert list(sampler._graphs) == [("paper", 64)]
    assert sampler.cuda_graph, "the capture failed and the sampler fell back"


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("static", [False, True])
def test_second_hop_of_another_type_is_uniform(static: bool, device: str) -> None:
    """Hop 2 samples the frontier that hop 1 reached, of another node type, uniformly.

    Paper i is written by author i; every author is affiliated with institutions 0..5.
    Hop 1 reaches one author per seed; hop 2 draws 3 of 6 institutions for each author.
    """
    trials = 20_000
    written_by = torch.arange(trials + 1)  # paper i <- author i
    affiliated = torch.arange(0, 6 * trials + 1, 6)  # author j <- institutions 0..5
    in_csr = {
        ("author", "writes", "paper"): (written_by, torch.arange(trials, dtype=torch.int32)),
        ("institution", "rev_affiliated_with", "author"): (
            affiliated,
            torch.arange(6, dtype=torch.int32).repeat(trials),
        ),
    }
    num_nodes = {"paper": trials, "author": trials, "institution": 6}
    fanouts = {
        ("author", "writes", "paper"): [1, 1],
        ("institution", "rev_affiliated_with", "author"): [3, 3],
    }
    sampler = HeteroNeighborSampler(
        in_csr, num_nodes, fanouts, seed_type="paper", device=device, seed=11,
        static_shapes=static,
    )  # fmt: skip
    batch = sampler.sample(torch.arange(trials)).to("cpu")
    et = ("institution", "rev_affiliated_with", "author")
    assert batch.num_nodes_per_hop["author"] == [0, trials, 0]
    assert batch.num_edges_per_hop[et] == [0, 3 * trials]
    edge_index = batch.edge_index[et]
    assert torch.equal(
        edge_index[1].view(trials, 3), torch.arange(trials).unsqueeze(1).expand(-1, 3)
    )
    ids = batch.node_ids["institution"][edge_index[0]].view(trials, 3)
    assert bool(ids.sort(1).values.diff(dim=1).ne(0).all()), "an institution picked twice"
    counts = Counter((1 << ids).sum(1).tolist())
    assert len(counts) == 20
    stat = sum((c - trials / 20) ** 2 / (trials / 20) for c in counts.values())
    assert stat < chi2_crit_999(19), f"chi-square {stat:.1f} over 20 subsets"


def test_batches_feed_the_mean_aggregation_per_edge_type() -> None:
    """Each layer's prefix of an edge type's edges and bags is what ``mean_aggregate`` reads."""
    from distgnn_workload.models.aggregation import mean_aggregate

    _, csr = typed_graph(9)
    batch = HeteroNeighborSampler(csr, NUM_NODES, [4, 3], seed_type="paper").sample(
        torch.arange(0, 300, 4)
    )
    g = torch.Generator().manual_seed(0)
    x = {t: torch.randn(n, 5, generator=g) for t, n in batch.num_nodes.items()}
    for layer in (0, 1):
        num_src, num_dst, num_edges = batch.layer_sizes(layer)
        for et, n in num_edges.items():
            s, _, d = et
            src, dst = batch.edge_index[et][:, :n]
            out = mean_aggregate(x[s][: num_src[s]], src, batch.target_ptr[et][: num_dst[d] + 1])
            want = torch.zeros(num_dst[d], 5).index_add_(0, dst, x[s][src])
            want /= torch.bincount(dst, minlength=num_dst[d]).clamp(min=1).unsqueeze(1)
            torch.testing.assert_close(out, want)


def _sizes(batch: HeteroHopBatch) -> tuple[dict[str, list[int]], dict[EdgeType, list[int]]]:
    return batch.num_nodes_per_hop, batch.num_edges_per_hop


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("case", [0, 1, 3])
def test_fitted_caps_give_exact_batches_and_resample_past_them(case: int, device: str) -> None:
    """Caps fitted to a few batches: batches within them are exact; a batch over them is
    sampled again, exactly, and the relabel tables end clean either way."""
    fanouts = FANOUT_CASES[case]
    _, csr = typed_graph(case)
    sampler = HeteroNeighborSampler(
        csr, NUM_NODES, fanouts, device=device, seed=case, static_shapes=True,
        return_edge_ids=True, seed_type="paper",
    )  # fmt: skip
    g = torch.Generator().manual_seed(case)
    batches = [torch.randperm(300, generator=g)[:48] for _ in range(12)]
    caps = sampler.fit(batches[:4])
    assert caps is not None
    assert caps == sampler.caps()
    bounds = sampler.bounds(48)
    assert all(c <= b for c, b in zip(caps.flat(), bounds.flat(), strict=True))
    # tight caps: the largest size seen, no headroom, so that some batches exceed them
    tight = sampler.fit(batches[:4], headroom=1.0, slack=0, multiple=1)
    assert tight is not None
    assert tight.flat() != bounds.flat(), "the graph is too small to fit caps below the bounds"
    within = 0
    for seeds in batches:
        batch = sampler.sample(seeds).to("cpu")
        check_batch(batch, csr, full_fanouts(fanouts), seeds.tolist(), "paper")
        within += not tight.exceeded_by(
            [n for t in NUM_NODES for n in batch.num_nodes_per_hop[t]]
            + [n for et in sampler.edge_types for n in batch.num_edges_per_hop[et]]
        )
        assert all(bool((t == -1).all()) for t in sampler._local.values()), "table not reset"
    # far too tight (one node or edge per hop): every batch goes over, and is sampled again
    assert sampler.fit(batches[:1], headroom=0.0, slack=1, multiple=1) is not None
    before = sampler.overflows
    for seeds in batches[:3]:
        check_batch(
            sampler.sample(seeds).to("cpu"), csr, full_fanouts(fanouts), seeds.tolist(), "paper"
        )
        assert all(bool((t == -1).all()) for t in sampler._local.values()), "table not reset"
    assert sampler.overflows == before + 3
    assert within >= 1, "no batch was sampled within the fitted caps"


def test_fitted_caps_stay_within_the_bounds_and_above_what_was_seen() -> None:
    _, csr = typed_graph(1)
    sampler = HeteroNeighborSampler(
        csr, NUM_NODES, [15, 10, 5], seed_type="paper", static_shapes=True
    )
    batches = [torch.arange(i, 300, 5)[:40] for i in range(3)]
    caps = sampler.fit(batches)
    assert caps is not None
    bounds = sampler.bounds(40)
    sampled = [sampler._sample_dynamic({"paper": s}, "paper") for s in batches]
    for t, per_hop in caps.nodes.items():
        assert per_hop[0] == bounds.nodes[t][0]
        for h in range(1, len(per_hop)):
            most = max(b.num_nodes_per_hop[t][h] for b in sampled)
            assert min(most, bounds.nodes[t][h]) <= per_hop[h] <= bounds.nodes[t][h]
    for et, per_hop in caps.edges.items():
        for h, cap in enumerate(per_hop):
            assert cap <= min(bounds.edges[et][h], caps.nodes[et[2]][h] * sampler.fanouts[et][h])
    with pytest.raises(ValueError, match="caps for another batch"):
        sample_static(
            sampler.graph, sampler._local, sampler.fanouts, sampler.generator, "paper",
            torch.zeros(7, dtype=torch.int64), torch.tensor(7), caps=caps,
        )  # fmt: skip
