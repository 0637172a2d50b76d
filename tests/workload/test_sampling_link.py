"""Link sampling: seed edges and negatives in the subgraph, supervision edges out of it."""

from __future__ import annotations

import pytest
import torch

from distgnn_workload.sampling import NeighborSampler, csc_from_edge_index
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler
from distgnn_workload.sampling.seed_edges import LinkLayout, pack_pairs, unpack_pairs
from tests.workload.test_sampling_neighbor import chi2_crit_999

NUM_NODES = 200


def undirected_graph(seed: int = 0) -> torch.Tensor:
    """``edge_index`` of a simple undirected graph (both directions), degrees up to ~30."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, NUM_NODES, (1500,), generator=g)
    dst = torch.randint(0, NUM_NODES, (1500,), generator=g)
    keep = src != dst
    both = torch.stack([torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])])
    key = torch.unique(both[0] * NUM_NODES + both[1])
    return torch.stack([key // NUM_NODES, key % NUM_NODES])


def make_sampler(
    edge_index: torch.Tensor, fanouts: list[int], *, static: bool, **kwargs: object
) -> LinkNeighborSampler:
    indptr, indices = csc_from_edge_index(edge_index, NUM_NODES)
    nodes = NeighborSampler(indptr, indices, fanouts, device="cpu", static_shapes=static, seed=3)
    return LinkNeighborSampler(nodes, **kwargs)  # type: ignore[arg-type]


def sampled_edges(hop: object) -> set[tuple[int, int]]:
    """Global (source, target) of every sampled edge."""
    ids = hop.node_ids  # type: ignore[attr-defined]
    ei = hop.edge_index  # type: ignore[attr-defined]
    return set(zip(ids[ei[0]].tolist(), ids[ei[1]].tolist(), strict=True))


def test_pairs_pack_and_unpack() -> None:
    src, dst = torch.tensor([0, 5, 199]), torch.tensor([199, 0, 7])
    back = unpack_pairs(pack_pairs(src, dst, NUM_NODES), NUM_NODES)
    assert back[0].tolist() == src.tolist()
    assert back[1].tolist() == dst.tolist()


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("reverse", [True, False])
def test_supervision_edges_are_left_out_and_nothing_else(static: bool, reverse: bool) -> None:
    edge_index = undirected_graph()
    sampler = make_sampler(edge_index, [64, 64], static=static, exclude_reverse=reverse)
    pick = torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(1))[:16]
    src, dst = edge_index[0, pick], edge_index[1, pick]
    hop = sampler.sample(pack_pairs(src, dst, NUM_NODES))
    layout = LinkLayout.of_batch(hop.num_seeds, 1, "uniform")
    assert layout.positives == 16
    seeds = hop.seed_ids
    assert seeds[:16].tolist() == src.tolist()
    assert seeds[16:32].tolist() == dst.tolist()
    got = sampled_edges(hop)
    banned = set(zip(src.tolist(), dst.tolist(), strict=True))
    reverse_edges = set(zip(dst.tolist(), src.tolist(), strict=True))
    if reverse:
        banned |= reverse_edges
    assert not got & banned
    # the fanout exceeds every degree, so every other in-edge of a seed is in the subgraph
    all_edges = set(zip(edge_index[0].tolist(), edge_index[1].tolist(), strict=True))
    seed_set = set(seeds.tolist())
    expected = {(u, v) for (u, v) in all_edges if v in seed_set} - banned
    assert {(u, v) for (u, v) in got if v in seed_set} == expected
    if not reverse:
        assert reverse_edges <= got


@pytest.mark.parametrize("kind", ["uniform", "corruptDestination"])
def test_negatives_are_seeds_in_their_rows(kind: str) -> None:
    sampler = make_sampler(undirected_graph(), [5, 3], static=False, negatives=3, kind=kind)
    src, dst = torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])
    hop = sampler.sample(pack_pairs(src, dst, NUM_NODES))
    layout = LinkLayout.of_batch(hop.num_seeds, 3, kind)
    assert layout.positives == 4
    assert hop.num_seeds == (4 * (2 + 3) if kind == "corruptDestination" else 4 * (2 + 6))
    pos_src, pos_dst, neg_src, neg_dst = layout.rows()
    ids = hop.seed_ids
    assert ids[pos_src].tolist() == src.tolist()
    assert ids[pos_dst].tolist() == dst.tolist()
    assert neg_src.numel() == neg_dst.numel() == 12
    if kind == "corruptDestination":
        assert ids[neg_src].tolist() == src.repeat_interleave(3).tolist()
    assert bool(((ids >= 0) & (ids < NUM_NODES)).all())


def test_negatives_are_uniform_and_follow_the_seed() -> None:
    sampler = make_sampler(undirected_graph(), [2], static=False, negatives=50, kind="uniform")
    pairs = pack_pairs(torch.tensor([1]), torch.tensor([2]), NUM_NODES)
    counts = torch.zeros(NUM_NODES)
    for _ in range(200):
        hop = sampler.sample(pairs)
        counts += torch.bincount(hop.seed_ids[2:], minlength=NUM_NODES)
    expected = counts.sum() / NUM_NODES
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert stat < chi2_crit_999(NUM_NODES - 1)
    sampler.reseed(11)
    first = sampler.sample(pairs).seed_ids
    sampler.reseed(11)
    assert torch.equal(sampler.sample(pairs).seed_ids, first)


def test_bad_negative_kind_is_named() -> None:
    with pytest.raises(ValueError, match="negative kind"):
        make_sampler(undirected_graph(), [2], static=False, kind="hard")


class _EagerGraph:
    """Stands in for a CUDA graph on the CPU: replay re-runs the captured function on the
    captured buffers, so the replay path's buffer plumbing is what is tested."""

    def __init__(self, run: object) -> None:
        self.run = run

    def replay(self) -> None:
        self.run()  # type: ignore[operator]


def test_replayed_batches_exclude_their_own_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    from distgnn_workload.sampling.graph_capture import CapturedRun

    edge_index = undirected_graph(4)
    sampler = make_sampler(edge_index, [64, 64], static=True)
    nodes = sampler.nodes
    nodes.cuda_graph = True  # as on CUDA, with the capture below

    def capture(
        key: object, padded: torch.Tensor, num_seeds: int, exclude: torch.Tensor | None
    ) -> object:
        seeds = padded.clone()
        excluded = None if exclude is None else exclude.clone()
        count = torch.tensor(num_seeds)
        out = nodes._sample_static(seeds, count, excluded)

        def run() -> None:
            fresh = nodes._sample_static(seeds, count, excluded)
            for name in ("node_ids", "src", "dst", "target_ptr"):
                for key, buffer in getattr(out, name).items():
                    buffer.copy_(getattr(fresh, name)[key])
            out.counts.copy_(fresh.counts)

        return CapturedRun(_EagerGraph(run), seeds, count, out, excluded)  # type: ignore[arg-type]

    monkeypatch.setattr(nodes, "_capture", capture)
    all_edges = set(zip(edge_index[0].tolist(), edge_index[1].tolist(), strict=True))
    for seed in range(3):  # the second and third batches replay the first one's graph
        g = torch.Generator().manual_seed(seed)
        pick = torch.randperm(edge_index.size(1), generator=g)[:10]
        src, dst = edge_index[0, pick], edge_index[1, pick]
        hop = sampler.sample(pack_pairs(src, dst, NUM_NODES))
        got = sampled_edges(hop)
        banned = set(zip(src.tolist(), dst.tolist(), strict=True))
        banned |= set(zip(dst.tolist(), src.tolist(), strict=True))
        assert not got & banned
        seeds = set(hop.seed_ids.tolist())
        expected = {(u, v) for (u, v) in all_edges if v in seeds} - banned
        assert {(u, v) for (u, v) in got if v in seeds} == expected
    assert len(nodes._graphs) == 1
