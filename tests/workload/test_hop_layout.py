"""A static hop's layout: relations grouped by source type, regions of one buffer, and index
tensors made once per layout (a CUDA graph capture must find them made)."""

from __future__ import annotations

import torch

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling import HeteroNeighborSampler
from distgnn_workload.sampling.hop_layout import Bounds, HopLayout, Regions, hop_consts
from distgnn_workload.sampling.relabel import RelabelTables
from distgnn_workload.sampling.static_sample import StaticCaps, sample_static
from tests.workload.hetero_graphs import NUM_NODES, typed_graph

WRITES: EdgeType = ("author", "writes", "paper")
CITES: EdgeType = ("paper", "cites", "paper")
REV_WRITES: EdgeType = ("paper", "rev_writes", "author")
TOPIC: EdgeType = ("field", "rev_has_topic", "paper")


def test_relations_are_grouped_by_source_type_in_edge_type_order() -> None:
    edge_types = [WRITES, REV_WRITES, TOPIC, CITES]
    types = ["paper", "author", "field"]
    fanouts = {WRITES: [2, 2], REV_WRITES: [3, 0], TOPIC: [0, 1], CITES: [4, 4]}
    caps = {"paper": [8, 40], "author": [0, 16], "field": [0, 5]}
    hop0 = HopLayout.of(edge_types, types, fanouts, caps, 0)
    # into paper only at hop 0; the fanout-0 relation gets offsets but draws nothing
    assert hop0.ptr_relations == (WRITES, TOPIC, CITES)
    assert hop0.order == (CITES, WRITES)  # paper's source relations first, then author's
    assert hop0.entries == (8 * 4, 8 * 2)
    assert hop0.source_types == ("paper", "author")
    hop1 = HopLayout.of(edge_types, types, fanouts, caps, 1)
    assert hop1.order == (CITES, WRITES, TOPIC)  # REV_WRITES draws 0 at hop 1
    assert hop1.ptr_relations == (WRITES, REV_WRITES, TOPIC, CITES)
    consts = hop_consts(hop1, torch.device("cpu"), None)
    assert consts.entry_relation.tolist() == [0] * 160 + [1] * 80 + [2] * 40
    assert consts.entry_row[158:162].tolist() == [39, 39, 0, 0]  # rows of 4 then 2 draws
    assert consts.type_bounds.at.tolist() == [0, 160, 240, 160, 240, 280]
    assert consts.relation_type.tolist() == [0, 1, 2]


def test_regions_keep_each_buffers_shape_and_a_shared_dump() -> None:
    regions = Regions.of({"a": 3, "b": 0, "c": 2})
    buf = regions.buffer({"a": 7, "b": 8, "c": 9}, torch.device("cpu"))
    views = regions.views(buf)
    assert [v.numel() for v in views.values()] == [4, 1, 3]  # cap + its own dump slot
    assert views["a"].tolist() == [7] * 4
    assert views["c"].tolist() == [9] * 3
    assert regions.dump == buf.numel() - 1 == 8
    views["b"][0] = -5
    assert buf[4] == -5  # views, not copies


def test_index_tensors_are_made_once_per_layout() -> None:
    _, csr = typed_graph(3)
    sampler = HeteroNeighborSampler(csr, NUM_NODES, [4, 3], seed_type="paper")
    table = RelabelTables.empty(sampler.graph.num_nodes, torch.device("cpu"))
    seeds = torch.arange(0, 64, 2)
    caps = StaticCaps.of(sampler.graph, sampler.fanouts, "paper", seeds.numel())
    consts: dict[object, object] = {}

    def run() -> list[int]:
        out = sample_static(
            sampler.graph, table, sampler.fanouts, sampler.generator, "paper", seeds,
            torch.tensor(seeds.numel()), caps=caps, consts=consts,
        )  # fmt: skip
        assert out.counts[0] == seeds.numel()  # paper's seeds
        return [id(v) for v in consts.values()]

    first = run()
    assert first, "the run kept no index tensors"
    assert run() == first  # the second run (a capture's) makes none
    assert (table.buffer == -1).all()


def test_bounds_read_the_sum_before_each_position() -> None:
    values = torch.tensor([3, 0, 2, 5, 1])
    bounds = Bounds.of(torch.tensor([0, 2, 4, 5]))
    # an exclusive cumulative sum, read at the bounds, without making one
    exclusive = torch.cat([torch.zeros(1, dtype=values.dtype), values.cumsum(0)])
    assert (
        bounds.before(values.cumsum(0)).tolist() == exclusive[bounds.at].tolist() == [0, 3, 10, 11]
    )
