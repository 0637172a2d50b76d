"""Small typed graphs and a pure-Python check of a HeteroHopBatch, for the typed sampler tests."""

from __future__ import annotations

from collections import Counter

import torch

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling import HeteroHopBatch, csc_from_edge_index

CSR = tuple[torch.Tensor, torch.Tensor]

MAG_LIKE: dict[EdgeType, int] = {
    ("author", "writes", "paper"): 1500,
    ("paper", "rev_writes", "author"): 1500,
    ("paper", "cites", "paper"): 2000,
    ("paper", "has_topic", "field"): 900,
    ("field", "rev_has_topic", "paper"): 900,
    ("author", "affiliated_with", "institution"): 150,
    ("institution", "rev_affiliated_with", "author"): 150,
}
NUM_NODES = {"paper": 300, "author": 200, "field": 30, "institution": 20}


def random_edges(num_src: int, num_dst: int, num_edges: int, seed: int) -> torch.Tensor:
    """``[2, E]`` distinct (src, dst) pairs with skewed in-degrees, some of them zero."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(num_dst, generator=g) ** 4 + 1e-3
    weights[: num_dst // 10] = 0  # nodes with no in-edges of this type
    dst = torch.multinomial(weights, num_edges, replacement=True, generator=g)
    src = torch.randint(0, num_src, (num_edges,), generator=g)
    key = torch.unique(dst * num_src + src)
    return torch.stack([key % num_src, key // num_src])


def typed_graph(seed: int) -> tuple[dict[EdgeType, torch.Tensor], dict[EdgeType, CSR]]:
    """A MAG-shaped typed graph: its edge_index per edge type, and its destination CSR."""
    edges = {
        et: random_edges(NUM_NODES[et[0]], NUM_NODES[et[2]], count, seed + i)
        for i, (et, count) in enumerate(MAG_LIKE.items())
    }
    csr = {et: csc_from_edge_index(ei, NUM_NODES[et[2]]) for et, ei in edges.items()}
    return edges, csr


def adjacency(csr: dict[EdgeType, CSR]) -> dict[EdgeType, list[list[int]]]:
    out = {}
    for et, (indptr, indices) in csr.items():
        ptr, idx = indptr.tolist(), indices.tolist()
        out[et] = [idx[ptr[v] : ptr[v + 1]] for v in range(len(ptr) - 1)]
    return out


def check_batch(
    batch: HeteroHopBatch,
    csr: dict[EdgeType, CSR],
    fanouts: dict[EdgeType, list[int]],
    seeds: list[int],
    seed_type: str,
) -> None:
    """Replay the batch in pure Python: valid edges, exact counts, dedup, hop layout."""
    adj = adjacency(csr)
    node_ids = {t: v.tolist() for t, v in batch.node_ids.items()}
    num_hops = batch.num_hops
    assert batch.seed_type == seed_type
    assert batch.num_seeds == len(seeds)
    assert node_ids[seed_type][: len(seeds)] == seeds
    for t, ids in node_ids.items():
        assert len(ids) == sum(batch.num_nodes_per_hop[t]), t
        assert len(batch.num_nodes_per_hop[t]) == num_hops + 1
        rest = ids[len(seeds) :] if t == seed_type else ids
        assert len(set(rest)) == len(rest), f"a {t} node appears twice"
        if t == seed_type:
            assert not set(rest) & set(seeds), "a seed was sampled again"
        else:
            assert batch.num_nodes_per_hop[t][0] == 0
    local: dict[str, dict[int, int]] = {t: {} for t in node_ids}
    for row, v in enumerate(seeds):
        local[seed_type].setdefault(v, row)
    lo = dict.fromkeys(node_ids, 0)
    hi = {t: batch.num_nodes_per_hop[t][0] for t in node_ids}
    e0 = dict.fromkeys(csr, 0)
    ptr: dict[EdgeType, list[int]] = {et: [0] for et in csr}
    for h in range(num_hops):
        expected_new: dict[str, list[int]] = {t: [] for t in node_ids}
        for et in batch.edge_types:
            s, _, d = et
            fanout = fanouts[et][h]
            e1 = e0[et] + batch.num_edges_per_hop[et][h]
            src, dst = batch.edge_index[et][:, e0[et] : e1].tolist()
            assert dst == sorted(dst), f"{et} hop {h + 1} edges are not grouped by target"
            assert all(lo[d] <= v < hi[d] for v in dst), f"{et} hop {h + 1}: bad target"
            by_target: dict[int, list[int]] = {v: [] for v in range(lo[d], hi[d])}
            for u, v in zip(src, dst, strict=True):
                by_target[v].append(node_ids[s][u])
            for v in range(lo[d], hi[d]):
                neighbours, sampled = adj[et][node_ids[d][v]], by_target[v]
                want = len(neighbours) if fanout < 0 else min(len(neighbours), fanout)
                assert len(sampled) == want, f"{et} {node_ids[d][v]}: {len(sampled)} != {want}"
                assert len(set(sampled)) == len(sampled), f"{et}: a neighbour drawn twice"
                assert not Counter(sampled) - Counter(neighbours), f"{et}: not a neighbour"
                if fanout < 0 or len(neighbours) <= fanout:
                    assert sampled == neighbours
                ptr[et].append(ptr[et][-1] + len(sampled))
            if batch.edge_ids is not None:
                indptr, indices = csr[et]
                pos = batch.edge_ids[et][e0[et] : e1]
                assert indices[pos].tolist() == [node_ids[s][u] for u in src]
                targets = torch.tensor([node_ids[d][v] for v in dst], dtype=torch.int64)
                assert bool(((pos >= indptr[targets]) & (pos < indptr[targets + 1])).all())
            for gid in (node_ids[s][u] for u in src):  # first appearance numbering
                if gid not in local[s]:
                    local[s][gid] = hi[s] + len(expected_new[s])
                    expected_new[s].append(gid)
            assert src == [local[s][node_ids[s][u]] for u in src]
            e0[et] = e1
        for t in node_ids:
            assert batch.num_nodes_per_hop[t][h + 1] == len(expected_new[t])
            assert node_ids[t][hi[t] : hi[t] + len(expected_new[t])] == expected_new[t]
            lo[t], hi[t] = hi[t], hi[t] + len(expected_new[t])
    for et in csr:
        assert e0[et] == batch.edge_index[et].size(1)
        assert batch.target_ptr[et].tolist() == ptr[et], f"{et}: target_ptr"


def same_hop(a: HeteroHopBatch, b: HeteroHopBatch) -> None:
    """Assert that two typed batches hold the same seeds, nodes, edges and sizes."""
    assert (a.seed_type, a.num_seeds) == (b.seed_type, b.num_seeds)
    assert a.num_nodes_per_hop == b.num_nodes_per_hop
    assert a.num_edges_per_hop == b.num_edges_per_hop
    for t in a.node_ids:
        assert torch.equal(a.node_ids[t], b.node_ids[t]), t
    for et in a.edge_index:
        assert torch.equal(a.edge_index[et], b.edge_index[et]), et
        assert torch.equal(a.target_ptr[et], b.target_ptr[et]), et
