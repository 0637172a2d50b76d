"""R-SAGE and R-GCN against PyG's to_hetero(GraphSAGE) and RGCNConv on the same sampled batch."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import Tensor, nn
from torch_geometric.nn import GraphSAGE, RGCNConv, to_hetero

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import Arch, ModelSpec
from distgnn_workload.models import build_hetero_model, build_model
from distgnn_workload.models.relational import LayerPlan
from distgnn_workload.models.rgcn import RGCN
from distgnn_workload.models.rsage import RSAGE
from distgnn_workload.sampling import HeteroHopBatch, HeteroNeighborSampler
from distgnn_workload.sampling.csr import type_key
from distgnn_workload.sampling.reference_hetero_sampler import ReferenceHeteroSampler
from tests.workload.hetero_graphs import MAG_LIKE, NUM_NODES, typed_graph

EDGE_TYPES: list[EdgeType] = list(MAG_LIKE)
NODE_TYPES = list(NUM_NODES)
WIDTHS = {"paper": 16, "author": 8, "field": 8, "institution": 12}
HIDDEN, CLASSES = 24, 5


def _batch(
    fanouts: list[int], seed: int = 0, num_seeds: int = 40, fast: bool = False
) -> HeteroHopBatch:
    """A batch of the reference sampler, or of the vectorised one (int32 neighbour ids)."""
    _, csr = typed_graph(seed)
    sampler: ReferenceHeteroSampler | HeteroNeighborSampler
    if fast:
        sampler = HeteroNeighborSampler(csr, NUM_NODES, fanouts, seed_type="paper", seed=seed)
    else:
        sampler = ReferenceHeteroSampler(csr, NUM_NODES, fanouts, seed_type="paper", seed=seed)
    seeds = torch.randperm(NUM_NODES["paper"], generator=torch.Generator().manual_seed(seed))
    return sampler.sample(seeds[:num_seeds])


def _inputs(batch: HeteroHopBatch, widths: dict[str, int], seed: int = 1) -> dict[str, Tensor]:
    """Each sampled node's input row (a function of its type and global id)."""
    g = torch.Generator().manual_seed(seed)
    table = {t: torch.randn(NUM_NODES[t], widths[t], generator=g) for t in NODE_TYPES}
    return {t: table[t][batch.node_ids[t]] for t in NODE_TYPES}


def _to_hetero_sage(num_layers: int) -> nn.Module:
    torch.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gnn = GraphSAGE((-1, -1), HIDDEN, num_layers, out_channels=CLASSES)
        model: nn.Module = to_hetero(gnn, (NODE_TYPES, EDGE_TYPES), aggr="sum")
    return model


@pytest.mark.parametrize(
    ("num_layers", "aggregation", "fast"),
    [
        (1, "segment", False),
        (2, "segment", False),
        (3, "segment", False),
        (2, "embedding_bag", False),
        (3, "scatter", False),
        (2, "segment", True),
        (3, "embedding_bag", True),
    ],
)
def test_rsage_equals_to_hetero_graphsage(num_layers: int, aggregation: str, fast: bool) -> None:
    batch = _batch([6, 4, 3][:num_layers], fast=fast)
    x = _inputs(batch, WIDTHS)
    ref = _to_hetero_sage(num_layers).eval()
    with torch.no_grad():
        ref(x, batch.edge_index)  # initialise the lazy weights
    ours = RSAGE(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, num_layers, "paper")
    ours.aggregation = aggregation  # type: ignore[assignment]
    ours.eval()
    state = ref.state_dict()
    missing, _ = ours.load_state_dict(
        {k: v for k, v in state.items() if k in ours.state_dict()}, strict=False
    )
    assert not missing
    # the last layer holds only the edge types into the target type
    last = {k.split(".")[2] for k in ours.state_dict() if k.startswith(f"convs.{num_layers - 1}.")}
    assert last == {type_key(et) for et in EDGE_TYPES if et[2] == "paper"}

    expected = ref(x, batch.edge_index)["paper"][: batch.num_seeds]
    got = ours(x, batch)
    assert got.shape == (batch.num_seeds, CLASSES)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)

    # and the same gradients for every weight both hold
    expected.square().sum().backward()
    got.square().sum().backward()
    ref_params = dict(ref.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, ref_params[name].grad, rtol=1e-4, atol=1e-5)


def _homogeneous(
    batch: HeteroHopBatch, x: dict[str, Tensor]
) -> tuple[Tensor, Tensor, Tensor, dict[str, int]]:
    """The batch as RGCNConv reads it: stacked rows, edges with type offsets, relation ids."""
    offset, at = {}, 0
    for t in NODE_TYPES:
        offset[t] = at
        at += batch.node_ids[t].numel()
    edges, rel = [], []
    for r, et in enumerate(EDGE_TYPES):
        ei = batch.edge_index[et]
        edges.append(torch.stack([ei[0] + offset[et[0]], ei[1] + offset[et[2]]]))
        rel.append(torch.full((ei.size(1),), r, dtype=torch.int64))
    return torch.cat([x[t] for t in NODE_TYPES]), torch.cat(edges, 1), torch.cat(rel), offset


@pytest.mark.parametrize("num_bases", [None, 3])
def test_rgcn_equals_rgcnconv_with_one_root(num_bases: int | None) -> None:
    # RGCNConv has one root and one bias for all nodes: give every node type the same ones.
    widths = dict.fromkeys(NODE_TYPES, 16)  # RGCNConv's homogeneous view needs one width
    batch = _batch([6, 4])
    x = _inputs(batch, widths)
    torch.manual_seed(5)
    convs = [
        RGCNConv(16, HIDDEN, len(EDGE_TYPES), num_bases=num_bases),
        RGCNConv(HIDDEN, CLASSES, len(EDGE_TYPES), num_bases=num_bases),
    ]
    for conv in convs:
        nn.init.normal_(conv.bias)  # nonzero, so that a misplaced bias shows
    ours = RGCN(NODE_TYPES, EDGE_TYPES, widths, HIDDEN, CLASSES, 2, "paper", num_bases=num_bases)
    ours.eval()
    with torch.no_grad():
        for layer, conv in enumerate(convs):
            mine = ours.layer(layer)
            keys = [type_key(et) for et in ours.plan.edge_types[layer]]
            rows = [EDGE_TYPES.index(et) for et in ours.plan.edge_types[layer]]
            if num_bases is None:
                for key, r in zip(keys, rows, strict=True):
                    mine.weight[key].copy_(conv.weight[r])
            else:
                assert mine.bases is not None
                assert mine.comp is not None
                mine.bases.copy_(conv.weight)
                mine.comp.copy_(conv.comp[rows])
            for t in mine.root:
                mine.root[t].copy_(conv.root)
                mine.bias[t].copy_(conv.bias)

    h, edge_index, edge_type, offset = _homogeneous(batch, x)
    expected = convs[1](convs[0](h, edge_index, edge_type).relu(), edge_index, edge_type)
    expected = expected[offset["paper"] : offset["paper"] + batch.num_seeds]
    got = ours(x, batch)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_rgcn_roots_are_per_node_type_and_widths_may_differ() -> None:
    batch = _batch([6, 4])
    x = _inputs(batch, WIDTHS)
    model = RGCN(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 2, "paper").eval()
    first = model.layer(0)
    assert tuple(first.root["author"].shape) == (WIDTHS["author"], HIDDEN)
    assert tuple(first.weight["institution__rev_affiliated_with__author"].shape) == (12, HIDDEN)
    assert "institution" not in first.root  # no later layer reads institutions' outputs
    before = model(x, batch)
    with torch.no_grad():
        first.root["author"].add_(1.0)  # authors reach the seeds through layer 2
        moved = model(x, batch)
    assert not torch.allclose(before, moved)
    with pytest.raises(ValueError, match="one input width for every source type"):
        RGCN(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 2, "paper", num_bases=2)


@pytest.mark.parametrize("arch", [Arch.rsage, Arch.rgcn])
def test_every_parameter_gets_a_gradient_and_bf16_autocast_runs(arch: Arch) -> None:
    # DistributedDataParallel needs every parameter in every step's graph
    batch = _batch([5, 3])
    x = _inputs(batch, WIDTHS)
    spec = ModelSpec(arch=arch, hidden_channels=HIDDEN, num_layers=2, fanout=[5, 3], dropout=0.3)
    model = build_hetero_model(spec, NODE_TYPES, EDGE_TYPES, WIDTHS, CLASSES, "paper")
    assert isinstance(model, RSAGE if arch == Arch.rsage else RGCN)
    model.train()
    model(x, batch).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
    model.eval()
    full = model(x, batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = model(x, batch)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), full, rtol=0.05, atol=0.05)


def test_layer_plan_keeps_only_what_the_seeds_read() -> None:
    plan = LayerPlan(NODE_TYPES, EDGE_TYPES, "paper", 2)
    assert plan.types_at_hop == [
        ["paper"],
        ["paper", "author", "field"],
        ["paper", "author", "field", "institution"],
    ]
    assert plan.dst_types == [["paper", "author", "field"], ["paper"]]
    assert ("author", "affiliated_with", "institution") not in plan.edge_types[0]
    assert plan.edge_types[1] == [et for et in EDGE_TYPES if et[2] == "paper"]


def test_bad_input_names_the_problem() -> None:
    batch = _batch([4, 2])
    x = _inputs(batch, WIDTHS)
    model = RSAGE(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 3, "paper")
    with pytest.raises(ValueError, match="2 hops but the model has 3 layers"):
        model(x, batch)
    model = RSAGE(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 2, "author")
    with pytest.raises(ValueError, match="seeds are of type 'paper' but the model predicts"):
        model(x, batch)
    model = RSAGE(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 2, "paper")
    with pytest.raises(ValueError, match="x has no entry for node type 'field'"):
        model({t: v for t, v in x.items() if t != "field"}, batch)
    with pytest.raises(ValueError, match=r"x\['author'\] has 1 rows"):
        model({**x, "author": x["author"][:1]}, batch)
    with pytest.raises(ValueError, match=r"in_channels has no width for node type\(s\) \['field'"):
        RSAGE(NODE_TYPES, EDGE_TYPES, {"paper": 4, "author": 4}, HIDDEN, CLASSES, 2, "paper")
    with pytest.raises(ValueError, match="target node type 'venue' is not one of"):
        RSAGE(NODE_TYPES, EDGE_TYPES, WIDTHS, HIDDEN, CLASSES, 2, "venue")
    one_way = [("author", "writes", "paper"), ("paper", "cites", "paper")]
    with pytest.raises(ValueError, match="node type 'author' receives no edge type"):
        RSAGE(NODE_TYPES, one_way, WIDTHS, HIDDEN, CLASSES, 2, "paper")
    # R-GCN keeps such nodes by their root weight
    RGCN(NODE_TYPES, one_way, WIDTHS, HIDDEN, CLASSES, 2, "paper")


def test_factory_dispatches_by_graph_kind() -> None:
    spec = ModelSpec(arch=Arch.rsage, hidden_channels=8, num_layers=2, fanout=[2, 2])
    with pytest.raises(ValueError, match="rsage is for heterogeneous graphs"):
        build_model(spec, 4, 3)
    sage = ModelSpec(arch=Arch.sage, hidden_channels=8, num_layers=2, fanout=[2, 2])
    with pytest.raises(ValueError, match="sage is for homogeneous graphs"):
        build_hetero_model(sage, NODE_TYPES, EDGE_TYPES, WIDTHS, 3, "paper")
