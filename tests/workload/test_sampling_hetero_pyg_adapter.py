"""PyGHeteroNeighborSampler under torch_geometric's NodeLoader, on a small HeteroData."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import HeteroData
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GraphSAGE, to_hetero
from torch_geometric.utils import trim_to_layer

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling import PyGHeteroNeighborSampler, SampledEdgesPerSeed
from tests.workload.hetero_graphs import MAG_LIKE, NUM_NODES, typed_graph

FANOUTS: dict[EdgeType, list[int]] = {et: [4, 2] if et[2] == "paper" else [3, 2] for et in MAG_LIKE}


def small_hetero_data() -> HeteroData:
    edges, _ = typed_graph(5)
    g = torch.Generator().manual_seed(0)
    data = HeteroData()
    for node_type, n in NUM_NODES.items():
        data[node_type].x = torch.randn(n, 6, generator=g)
    data["paper"].y = torch.randint(0, 3, (NUM_NODES["paper"],), generator=g)
    for et, edge_index in edges.items():
        shuffled = edge_index[:, torch.randperm(edge_index.size(1), generator=g)]
        data[et].edge_index = shuffled
        data[et].edge_attr = torch.arange(shuffled.size(1), dtype=torch.float32)
    return data


@pytest.mark.parametrize(("num_workers", "reference"), [(0, False), (2, False), (0, True)])
def test_node_loader_yields_valid_hetero_batches(num_workers: int, reference: bool) -> None:
    data = small_hetero_data()
    edge_sets = {et: set(map(tuple, data[et].edge_index.t().tolist())) for et in data.edge_types}
    in_degree = {
        et: torch.bincount(data[et].edge_index[1], minlength=NUM_NODES[et[2]])
        for et in data.edge_types
    }
    input_nodes = torch.arange(0, 300, 3)
    sampler = PyGHeteroNeighborSampler(data, FANOUTS, seed=1, reference=reference)
    loader = NodeLoader(
        data,
        node_sampler=sampler,
        input_nodes=("paper", input_nodes),
        batch_size=16,
        shuffle=True,
        num_workers=num_workers,
    )
    seeds_seen: list[int] = []
    per_seed = SampledEdgesPerSeed()
    for batch in loader:
        assert isinstance(batch, HeteroData)
        bs = batch["paper"].batch_size
        seeds_seen.extend(batch["paper"].n_id[:bs].tolist())
        per_seed.add_pyg(batch, "paper")
        for node_type in NUM_NODES:
            n_id = batch[node_type].n_id
            assert torch.equal(batch[node_type].x, data[node_type].x[n_id])
            assert sum(batch[node_type].num_sampled_nodes) == n_id.numel()
            if node_type != "paper":
                assert batch[node_type].num_sampled_nodes[0] == 0
        assert batch["paper"].num_sampled_nodes[0] == bs
        for et in data.edge_types:
            s, _, d = et
            edge_index = batch[et].edge_index
            assert sum(batch[et].num_sampled_edges) == edge_index.size(1)
            src, dst = batch[s].n_id[edge_index[0]], batch[d].n_id[edge_index[1]]
            pairs = zip(src.tolist(), dst.tolist(), strict=True)
            assert all(p in edge_sets[et] for p in pairs), f"{et}: an edge not in the graph"
            e_id = batch[et].e_id
            assert torch.equal(data[et].edge_index[:, e_id], torch.stack([src, dst]))
            assert torch.equal(batch[et].edge_attr, data[et].edge_attr[e_id])
            if d == "paper":  # the seeds' first hop: min(in-degree, fanout) edges each
                first = edge_index[:, : batch[et].num_sampled_edges[0]]
                counts = torch.bincount(first[1], minlength=bs)
                want = in_degree[et][batch["paper"].n_id[:bs]].clamp(max=FANOUTS[et][0])
                assert torch.equal(counts, want), et
    assert sorted(seeds_seen) == input_nodes.tolist()
    assert per_seed.seeds == input_nodes.numel()
    assert per_seed.total_per_seed() > 0


def test_batches_trim_and_feed_a_hetero_model() -> None:
    data = small_hetero_data()
    sampler = PyGHeteroNeighborSampler(data, FANOUTS, seed=2)
    loader = NodeLoader(
        data, node_sampler=sampler, input_nodes=("paper", torch.arange(40)), batch_size=20
    )
    model = to_hetero(GraphSAGE(6, 8, num_layers=2, out_channels=3), data.metadata(), aggr="sum")
    for batch in loader:
        nodes, edges = batch.collect("num_sampled_nodes"), batch.collect("num_sampled_edges")
        x, edge_index, _ = trim_to_layer(1, nodes, edges, batch.x_dict, batch.edge_index_dict)
        for (s, _, d), ei in edge_index.items():
            if ei.numel():  # layer 2 reads hops 0..1 and writes hop 0
                assert int(ei[0].max()) < x[s].size(0)
                assert int(ei[1].max()) < nodes[d][0]
        out = model(batch.x_dict, batch.edge_index_dict)
        assert out["paper"].shape == (batch["paper"].n_id.numel(), 3)
        assert torch.isfinite(out["paper"][: batch["paper"].batch_size]).all()


def test_untyped_inputs_and_edge_sampling_are_refused() -> None:
    sampler = PyGHeteroNeighborSampler(small_hetero_data(), [2])
    with pytest.raises(NotImplementedError, match="seed nodes only"):
        sampler.sample_from_edges(None)
    with pytest.raises(ValueError, match="paper__sells__author"):
        PyGHeteroNeighborSampler(small_hetero_data(), {("paper", "sells", "author"): [2]})
