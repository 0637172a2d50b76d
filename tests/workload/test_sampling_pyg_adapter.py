"""PyGNeighborSampler under torch_geometric's NodeLoader."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader

from distgnn_workload.sampling import PyGNeighborSampler


def small_data(num_nodes: int = 200) -> Data:
    g = torch.Generator().manual_seed(0)
    key = torch.unique(torch.randint(0, num_nodes * num_nodes, (2000,), generator=g))
    edge_index = torch.stack([key // num_nodes, key % num_nodes])
    x = torch.randn(num_nodes, 6, generator=g)
    y = torch.randint(0, 3, (num_nodes,), generator=g)
    return Data(x=x, y=y, edge_index=edge_index, num_nodes=num_nodes)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_node_loader_batches_are_valid_subgraphs(num_workers: int) -> None:
    data = small_data()
    edges = set(map(tuple, data.edge_index.t().tolist()))
    in_degree = torch.bincount(data.edge_index[1], minlength=data.num_nodes)
    fanouts = [4, 3]
    input_nodes = torch.arange(0, 200, 3)
    loader = NodeLoader(
        data,
        node_sampler=PyGNeighborSampler(data, fanouts, seed=1),
        input_nodes=input_nodes,
        batch_size=16,
        shuffle=True,
        num_workers=num_workers,
    )
    seeds_seen: list[int] = []
    for batch in loader:
        n_id = batch.n_id
        bs = batch.batch_size
        seeds_seen.extend(n_id[:bs].tolist())
        assert torch.equal(batch.x, data.x[n_id])
        assert torch.equal(batch.y, data.y[n_id])
        assert batch.num_sampled_nodes[0] == bs
        assert sum(batch.num_sampled_nodes) == n_id.numel()
        assert sum(batch.num_sampled_edges) == batch.edge_index.size(1)
        src, dst = n_id[batch.edge_index[0]], n_id[batch.edge_index[1]]
        assert all((s, d) in edges for s, d in zip(src.tolist(), dst.tolist(), strict=True))
        # the seeds' first hop: min(in-degree, fanout) edges each
        first = batch.edge_index[:, : batch.num_sampled_edges[0]]
        counts = torch.bincount(first[1], minlength=bs)
        assert torch.equal(counts, in_degree[n_id[:bs]].clamp(max=fanouts[0]))
    assert sorted(seeds_seen) == input_nodes.tolist()


def test_link_loader_batches_hold_their_labelled_edges() -> None:
    from torch_geometric.loader import LinkLoader
    from torch_geometric.sampler import NegativeSampling

    data = small_data()
    sampler = PyGNeighborSampler(data, [3, 2])
    labelled = data.edge_index[:, :40]
    loader = LinkLoader(
        data,
        link_sampler=sampler,
        edge_label_index=labelled,
        neg_sampling=NegativeSampling("binary", amount=1),
        batch_size=10,
    )
    seen = 0
    for batch in loader:
        label_index = batch.n_id[batch.edge_label_index]
        positives = label_index[:, batch.edge_label == 1]
        assert positives.size(1) == 10
        assert batch.edge_label.numel() == 20  # one binary negative per positive
        wanted = set(map(tuple, labelled.t().tolist()))
        assert set(map(tuple, positives.t().tolist())) <= wanted
        seen += positives.size(1)
    assert seen == 40
