"""The typed link sampler: a batch of packed seed edges of one edge type seeds both end types
with the positives and their negatives, and the batch's own edges and their reverses are
never among the sampled edges (as PyG's LinkNeighborLoader leaves them out)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.csr import typed_csr_from_edges
from distgnn_workload.sampling.link_sampler import HeteroLinkSampler
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.seed_edges import LinkLayout, pack_pairs

WRITES: EdgeType = ("author", "writes", "paper")
REV: EdgeType = ("paper", "rev_writes", "author")
CITES: EdgeType = ("paper", "cites", "paper")
COUNTS = {"author": 30, "paper": 40}


def _graph() -> dict[EdgeType, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    edges = {
        WRITES: (rng.integers(0, 30, 300), rng.integers(0, 40, 300)),
        CITES: (rng.integers(0, 40, 200), rng.integers(0, 40, 200)),
    }
    in_csr, _ = typed_csr_from_edges(edges, COUNTS, add_reverse=True)
    return in_csr


def _sampled(hop: object, et: EdgeType) -> set[tuple[int, int]]:
    s, _, d = et
    pair = hop.edge_index[et]  # type: ignore[attr-defined]
    src = hop.node_ids[s][pair[0]]  # type: ignore[attr-defined]
    dst = hop.node_ids[d][pair[1]]  # type: ignore[attr-defined]
    return set(zip(src.tolist(), dst.tolist(), strict=True))


def _positives(
    in_csr: dict[EdgeType, tuple[np.ndarray, np.ndarray]], count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    indptr, indices = in_csr[WRITES]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return torch.from_numpy(indices[:count].astype(np.int64)), torch.from_numpy(dst[:count])


@pytest.mark.parametrize("kind", ["uniform", "corruptDestination"])
def test_seeds_both_ends_and_negatives_and_leaves_the_batch_edges_out(kind: str) -> None:
    in_csr = _graph()
    sampler = HeteroLinkSampler(
        in_csr, COUNTS, [-1, -1], edge_type=WRITES, reverse=REV, negatives=3, kind=kind, seed=1
    )
    src, dst = _positives(in_csr, 25)
    hop = sampler.sample(pack_pairs(src, dst, COUNTS["paper"]))
    layout = LinkLayout.of_rows(WRITES, {t: hop.seed_rows(t) for t in COUNTS}, 3, kind)
    assert layout.positives == 25
    assert hop.seed_rows("paper") == 25 * 4
    assert hop.seed_rows("author") == (25 * 4 if kind == "uniform" else 25)
    pos_src, pos_dst, neg_src, neg_dst = layout.rows()
    assert torch.equal(hop.node_ids["author"][pos_src], src)
    assert torch.equal(hop.node_ids["paper"][pos_dst], dst)
    assert int(hop.node_ids["paper"][neg_dst].max()) < COUNTS["paper"]
    if kind == "corruptDestination":
        assert torch.equal(hop.node_ids["author"][neg_src], src.repeat_interleave(3))
    batch = set(zip(src.tolist(), dst.tolist(), strict=True))
    # with fanout -1 every other edge around the seeds is sampled: only the batch's are missing
    writes, reverse = _sampled(hop, WRITES), _sampled(hop, REV)
    assert writes
    assert reverse
    assert not batch & writes
    assert not {(p, a) for a, p in batch} & reverse
    # the plain typed sampler around the same ends does sample them
    whole = HeteroNeighborSampler(in_csr, COUNTS, [-1, -1]).sample_typed(
        {"author": src, "paper": dst}, "author"
    )
    assert batch <= _sampled(whole, WRITES)
    assert {(p, a) for a, p in batch} <= _sampled(whole, REV)
    # reverse None: the reverses stay, the edges themselves do not
    forward_only = HeteroLinkSampler(
        in_csr, COUNTS, [-1, -1], edge_type=WRITES, reverse=None, negatives=3, kind=kind, seed=1
    ).sample(pack_pairs(src, dst, COUNTS["paper"]))
    assert not batch & _sampled(forward_only, WRITES)
    assert {(p, a) for a, p in batch} <= _sampled(forward_only, REV)


def test_a_relation_within_one_type_leaves_both_directions_out() -> None:
    in_csr = _graph()
    sampler = HeteroLinkSampler(
        in_csr, COUNTS, [-1, -1], edge_type=CITES, reverse=CITES, negatives=2, seed=3
    )
    indptr, indices = in_csr[CITES]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    keep = indices != dst
    src_t = torch.from_numpy(indices[keep][:20].astype(np.int64))
    dst_t = torch.from_numpy(dst[keep][:20])
    hop = sampler.sample(pack_pairs(src_t, dst_t, COUNTS["paper"]))
    assert hop.seed_rows("paper") == 20 * (2 + 2 * 2)
    sampled = _sampled(hop, CITES)
    assert sampled
    for a, b in zip(src_t.tolist(), dst_t.tolist(), strict=True):
        assert (a, b) not in sampled
        assert (b, a) not in sampled
