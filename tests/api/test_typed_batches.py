"""The capacity plan of a typed graph's trainer per node type and relation: caps that are the
typed sampler's (the workload's own ``StaticCaps``), expected batches per relation, the
relational model's parameters (the workload's own models), and the trainer's items.

The job: syntheticMag at scale 0.01 (paper 7,364 nodes with 128 features; author 11,346,
institution 87 and field_of_study 600, featureless), reverse relations added, R-SAGE with 2
layers, fanout [10, 5], one GPU trainer in worker mode.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import pytest

from distgnn_api.capacity import Plan, RolePlan, build_plan, shapes
from distgnn_api.edge_types import EdgeType
from distgnn_api.graph_size import GraphSize, NodeTypeSize, RelationSize
from distgnn_api.graph_size_sources import from_spec, resolve
from distgnn_api.mag_shape import MAG_RELATIONS
from distgnn_api.pod_memory import GIB, Item, Shapes
from distgnn_api.spec import DistGNNJobSpec
from distgnn_api.typed_batches import embedding_block, typed_step
from distgnn_api.typed_shapes import (
    TypedHops,
    bounds,
    expected_batch,
    fitted,
    relation_fanouts,
    typed_layers,
    typed_num_params,
)
from distgnn_operator.cli import main
from distgnn_workload.models.factory import build_hetero_model
from distgnn_workload.models.relational import LayerPlan
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_sample import StaticCaps
from tests.api.specs import spec_from, write_shop_store_meta

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"
SMALL: dict[str, Any] = {
    "dataset": {
        "syntheticMag": {"scale": 0.01},
        "hetero": {"targetNodeType": "paper", "addReverseEdges": True},
    },
    "partition": {"algorithm": "random"},
    "samplers": {"replicas": 0},
    "trainers": {"replicas": 1, "gpusPerPod": 1},
    "model": {"arch": "rsage", "numLayers": 2, "fanout": [10, 5], "hiddenChannels": 64},
    "training": {"batchSize": 256, "bf16": True},
}
WRITES = "author__writes__paper"
AFFILIATED = "author__affiliated_with__institution"


def small(**changes: Any) -> DistGNNJobSpec:
    return spec_from(SMALL, **changes)


def graph_of(spec: DistGNNJobSpec) -> GraphSize:
    g = from_spec(spec)
    assert g is not None
    return g


def trainer(plan: Plan) -> RolePlan:
    found = plan.role("trainer")
    assert found is not None
    return found


def items(plan: Plan, role: str = "trainer") -> dict[str, Item]:
    found = plan.role(role)
    assert found is not None
    return {i.what: i for i in found.items}


def total(plan: Plan, prefix: str) -> int:
    return sum(i.bytes for i in trainer(plan).items if i.what.startswith(prefix))


def test_mag_relations_as_the_workload_stores_them() -> None:
    g = graph_of(small())
    counts = {r.edge_type: r.num_edges for r in g.relations}
    full = {et: max(1, round(n * 0.01)) for et, n in MAG_RELATIONS}
    # the relations in PyG's order, paper__cites__paper undirected in place, then the reverses
    assert list(counts) == [
        *full,
        ("institution", "rev_affiliated_with", "author"),
        ("paper", "rev_writes", "author"),
        ("field_of_study", "rev_has_topic", "paper"),
    ]
    assert counts[("paper", "cites", "paper")] == 2 * full[("paper", "cites", "paper")]
    assert counts[("paper", "rev_writes", "author")] == full[("author", "writes", "paper")]
    assert g.target_node_type == "paper"
    one_way = graph_of(small(dataset={**SMALL["dataset"], "hetero": {"addReverseEdges": False}}))
    assert {r.edge_type: r.num_edges for r in one_way.relations} == full
    # --nodes drops the types and relations; --edges keeps each relation's share
    assert resolve(small(), nodes=5_000).relations == ()
    given = resolve(small(), edges=g.num_edges)  # twice the stored edges
    assert [r.num_edges for r in given.relations] == [2 * r.num_edges for r in g.relations]


def test_bounds_and_fitted_caps_are_the_samplers(tmp_path: Path) -> None:
    """The caps equal the workload's StaticCaps for the same counts, fanouts and batches."""
    spec = small(model={"edgeFanouts": {WRITES: [7, 3], "paper__cites__paper": [12, 2]}})
    g = graph_of(spec)
    fanouts = relation_fanouts(spec, g)
    assert fanouts[("author", "writes", "paper")] == [7, 3]
    assert fanouts[("paper", "has_topic", "field_of_study")] == [10, 5]
    num_nodes = {t.name: t.num_nodes for t in g.node_types}
    edge_types = [r.edge_type for r in g.relations]
    ours = bounds(g, fanouts, "paper", 256)
    theirs = StaticCaps.bounds(num_nodes, edge_types, fanouts, "paper", 256)
    assert ours.nodes == theirs.nodes
    assert ours.edges == theirs.edges
    assert ours.nodes["paper"][1] == 256 * 12  # cites, the only relation into paper from paper

    # fitted to one batch of the expected sizes (rounded up), as the trainer fits to its own
    expected = expected_batch(g, fanouts, "paper", 256)

    @dataclass
    class Seen:
        num_nodes_per_hop: dict[str, list[int]]
        num_edges_per_hop: dict[EdgeType, list[int]]

    seen = Seen(
        {t: [math.ceil(n) for n in v] for t, v in expected.nodes.items()},
        {et: [math.ceil(n) for n in v] for et, v in expected.edges.items()},
    )
    batch = cast(HeteroHopBatch, seen)
    want = theirs.fitted([batch], fanouts)
    got = fitted(ours, expected, fanouts)
    assert got.nodes == want.nodes
    assert got.edges == want.edges
    assert got.node_slots < ours.node_slots


def test_a_relation_with_fanout_zero_adds_no_edges() -> None:
    spec = small()
    g = graph_of(spec)
    fanouts = relation_fanouts(spec, g)
    writes = ("author", "writes", "paper")
    fanouts[writes] = [0, 0]
    caps = bounds(g, fanouts, "paper", 256)
    expected = expected_batch(g, fanouts, "paper", 256)
    assert caps.edges[writes] == [0, 0]
    assert expected.edges[writes] == [0, 0]
    assert fitted(caps, expected, fanouts).edges[writes] == [0, 0]
    # author is then reached only at hop 2 (from the papers, paper__rev_writes__author)
    assert expected.nodes["author"][1] == 0
    num_nodes = {t.name: t.num_nodes for t in g.node_types}
    theirs = StaticCaps.bounds(num_nodes, [r.edge_type for r in g.relations], fanouts, "paper", 256)
    assert caps.edges == theirs.edges


def test_the_expected_batch_per_relation_by_hand() -> None:
    """item (100 nodes, 8 features) <- buys - user (1,000, featureless), 5,000 edges each way;
    10 item seeds, fanout [3, 8]: past the users' mean degree (5) at hop 1."""
    nodes_edges_features_classes_seeds = (1_100, 10_000, 8, 3, 50)
    g = GraphSize(
        *nodes_edges_features_classes_seeds,
        source="by hand",
        node_types=(NodeTypeSize("item", 100, 8), NodeTypeSize("user", 1_000, 0)),
        relations=(
            RelationSize("user", "buys", "item", 5_000),
            RelationSize("item", "rev_buys", "user", 5_000),
        ),
    )
    buys, rev = ("user", "buys", "item"), ("item", "rev_buys", "user")
    e = expected_batch(g, {buys: [3, 8], rev: [3, 8]}, "item", 10)
    # hop 0: each item seed draws min(3, 50) users; hop 1: each new user min(8, 5) items
    users = 1_000 * -math.expm1(-30 / 1_000)
    items_seen = 100 * -math.expm1(-(10 + 5 * users) / 100)
    assert e.edges[buys] == [30, 0]
    assert e.edges[rev] == pytest.approx([0, 5 * users])
    assert e.nodes["user"] == pytest.approx([0, users, 0])
    assert e.nodes["item"] == pytest.approx([10, 0, items_seen - 10])


def test_the_parameters_are_the_workload_models() -> None:
    for arch in ("rsage", "rgcn"):
        spec = small(model={"arch": arch, "embeddingDim": 24})
        g = graph_of(spec)
        names = [t.name for t in g.node_types]
        edge_types = [r.edge_type for r in g.relations]
        widths = {t.name: t.num_features or 24 for t in g.node_types}
        model = build_hetero_model(spec.model, names, edge_types, widths, g.num_classes, "paper")
        assert typed_num_params(spec, g) == sum(p.numel() for p in model.parameters())
        plan = LayerPlan(names, edge_types, "paper", 2)
        ours = typed_layers(spec, g)
        assert (ours.dst_types, ours.edge_types) == (plan.dst_types, plan.edge_types)
        assert ours.input_types == plan.input_types
    # the plan's parameters (and so its checkpoints) are the typed model's
    assert build_plan(small(), graph_of(small())).shapes.params == typed_num_params(
        small(), graph_of(small())
    )


def test_activations_grow_with_one_relations_fanout_and_not_anothers() -> None:
    base = build_plan(small(), graph_of(small()))
    more = small(model={"edgeFanouts": {WRITES: [20, 10]}})
    grown = build_plan(more, graph_of(more))
    assert total(grown, "activations of ") > total(base, "activations of ")
    assert total(grown, "activations of paper") > total(base, "activations of paper")
    assert total(grown, "CUDA-graph private pool") >= total(base, "CUDA-graph private pool")
    assert trainer(grown).gpu_bytes > trainer(base).gpu_bytes
    # author__affiliated_with__institution leads into institution, which no layer computes
    # and no hop before the last holds: its fanout changes nothing the trainer holds
    other = small(model={"edgeFanouts": {AFFILIATED: [20, 10]}})
    same = build_plan(other, graph_of(other))
    assert [i for i in trainer(same).items if "sampler" not in i.what] == [
        i for i in trainer(base).items if "sampler" not in i.what
    ]


def test_the_worker_trainer_steps_at_fitted_caps() -> None:
    spec = small()
    plan = build_plan(spec, graph_of(spec))
    gpu = items(plan)
    assert all(i.where == "gpu" for w, i in gpu.items() if w.startswith("fixed-shape"))
    (edges,) = [w for w in gpu if w.startswith("fixed-shape edges of 7 relations")]
    assert "at the fitted caps" in edges
    assert any(w.startswith("fixed-shape features of paper (") for w in gpu)
    for t in ("author", "institution", "field_of_study"):
        assert any(w.startswith(f"fixed-shape embedding ids of {t} (") for w in gpu)
        assert any(w.startswith(f"embedding lookups of {t} (") for w in gpu)
    for t in ("paper", "author", "field_of_study"):
        assert any(w.startswith(f"activations of {t} (") for w in gpu)
    assert not any(w.startswith("activations of institution") for w in gpu)
    assert "prefetched typed batches (2 + 2 in use, as expected)" in gpu
    assert any(w.startswith("1 typed sampler(s): static sampling at the fitted caps") for w in gpu)
    # the homogeneous view's trainer items are gone
    assert "activations (estimate)" not in gpu
    assert not any(w.startswith("1 sampler(s)") for w in gpu)
    (note,) = [n for n in plan.notes if n.startswith("typed batch of 256 paper seeds")]
    assert "steps fixed-shape (CUDA graph) at caps fitted to it" in note
    # the pool holds the larger of the forward's activations and lookups and the updates
    pool = total(plan, "CUDA-graph private pool")
    live = total(plan, "activations of ") + total(plan, "embedding lookups of ")
    assert pool == live + total(plan, "row-sparse Adam of 3 embedding table(s)")


def test_worker_trainers_over_the_feature_exchange_hold_the_batches_sampled_ahead() -> None:
    def batches(**changes: Any) -> Item:
        spec = small(**changes)
        (item,) = [i for w, i in items(build_plan(spec, graph_of(spec))).items()
                   if w.startswith("prefetched typed batches")]  # fmt: skip
        return item

    alone = batches()
    exchanged = batches(trainers={"replicas": 2, "gpusPerPod": 1})
    cached = batches(trainers={"replicas": 2, "gpusPerPod": 1}, samplers={"cacheRatio": 1.0})
    assert alone.what == "prefetched typed batches (2 + 2 in use, as expected)"
    assert exchanged.what == (
        "prefetched typed batches (2 + 2 in use, 2 sampled ahead over the feature exchange, "
        "as expected)"
    )
    assert cached.what == alone.what  # every row at hand: no exchange, no lookahead
    # per batch the same bytes, two more of them (the graph splits over 2, not the batch)
    assert exchanged.bytes * 4 == cached.bytes * 6


def _shapes(spec: DistGNNJobSpec) -> Shapes:
    return shapes(spec, graph_of(spec), 80 * GIB, None)


def test_two_worker_trainers_exchange_embedding_blocks_fitted_to_the_ids_per_owner() -> None:
    """With several worker-mode trainers each rank sends each owner a block fitted like a
    cap to the expected batch's nodes per owner (an even share): the lookups and updates
    hold world x block slots, not world x the whole buffer; server-client steps (at the
    bounds) send whole buffers."""
    one = build_plan(small(), graph_of(small()))
    two_spec = small(trainers={"replicas": 2, "gpusPerPod": 1})
    two = build_plan(two_spec, graph_of(two_spec))
    st = typed_step(two_spec, graph_of(two_spec), _shapes(two_spec), "gpu")
    assert st.fitted
    assert st.world == 2
    for t in ("author", "institution", "field_of_study"):
        cap = st.caps.node_cap(t)
        share = sum(st.expected.nodes[t]) / 2
        want = min(cap, -(-(math.ceil(math.ceil(share) * 1.25) + 256) // 128) * 128)
        assert embedding_block(st, t) == want
        (what,) = [w for w in items(two) if w.startswith(f"embedding lookups of {t} (")]
        assert f"blocks of {round(want):,} per rank" in what, what
        (alone,) = [w for w in items(one) if w.startswith(f"embedding lookups of {t} (")]
        assert "blocks of" not in alone  # one rank: a local lookup
    # authors: a block well under the buffer, so two ranks' lookups cost less than twice
    # the whole buffer would
    assert embedding_block(st, "author") < 0.75 * st.caps.node_cap("author")
    server_spec = small(samplers={"replicas": 2, "gpusPerPod": 1}, trainers={"replicas": 2})
    server = typed_step(server_spec, graph_of(server_spec), _shapes(server_spec), "gpu")
    assert not server.fitted
    assert embedding_block(server, "author") == server.caps.node_cap("author")


def test_server_client_steps_at_the_bounds_and_a_cpu_eagerly() -> None:
    spec = small(samplers={"replicas": 1, "gpusPerPod": 1, "concurrency": 2})
    plan = build_plan(spec, graph_of(spec))
    trainer_items = items(plan)
    assert any("at the bound caps" in w for w in trainer_items)
    assert "prefetched typed batches (4 + 2 in use, as expected)" in trainer_items
    sampler = items(plan, "sampler")
    assert any(
        w.startswith("2 typed sampler(s): static sampling at the bound caps") for w in sampler
    )
    assert any(w.startswith("gathered feature rows of 2 concurrent") for w in sampler)
    cpu = small(trainers={"gpusPerPod": 0}, training={"batchSize": 256, "bf16": False})
    eager = build_plan(cpu, graph_of(cpu))
    host = items(eager)
    assert not any(w.startswith(("fixed-shape", "CUDA-graph")) for w in host)
    assert all(i.where == "host" for w, i in host.items() if w.startswith("activations of"))
    assert any("steps eager (on the CPU)" in n for n in eager.notes)
    # a card too small for the fixed-shape inputs at a tenth of it: eager steps on the GPU
    tight = build_plan(spec, graph_of(spec), gpu_memory=GIB // 64)
    assert not any(w.startswith("fixed-shape") for w in items(tight))
    assert any("steps eager: fixed-shape inputs would take" in n for n in tight.notes)


def test_the_approximate_note_names_what_is_left() -> None:
    g = graph_of(small())
    typed, left = g.approximate.split("evenly as all nodes are;")
    assert "are still sized as its homogeneous view" in left
    for item in ("activations", "mini-batches", "fixed-shape step inputs", "typed samplers"):
        assert item in typed
    for item in ("topology", "labels", "feature exchange", "evaluation"):
        assert item in left
    assert "activations" not in left
    assert "mini-batches" not in left
    # a homogeneous graph is planned as before: no typed items
    plain = spec_from(
        {**SMALL, "dataset": {"synthetic": {"numNodes": 10_000, "numEdges": 50_000}}},
        model={"arch": "sage"},
    )
    plan = build_plan(plain, graph_of(plain))
    assert "activations (estimate)" in items(plan)
    assert not any(n.startswith("typed batch") for n in plan.notes)


def test_a_typed_store_plans_per_relation(tmp_path: Path) -> None:
    write_shop_store_meta(
        tmp_path,
        edge_types=["user__buys__item", "item__rev_buys__user"],
        target_node_type="item",
    )
    spec = spec_from(
        {**SMALL, "dataset": {"pyg": {"path": "datasets/shop.pt"}, "hetero": {}}},
        model={"embeddingDim": 16},
    )
    g = resolve(spec, meta=tmp_path)
    assert [(r.edge_type, r.num_edges) for r in g.relations] == [
        (("user", "buys", "item"), 30_000),
        (("item", "rev_buys", "user"), 30_000),
    ]
    assert g.target_node_type == "item"
    plan = build_plan(spec, g)
    gpu = items(plan)
    assert any(w.startswith("fixed-shape features of item (") for w in gpu)
    assert any(w.startswith("embedding lookups of user (") for w in gpu)
    # 256 item seeds draw min(10, 30,000 / 4,000) users each
    (note,) = [n for n in plan.notes if n.startswith("typed batch of 256 item seeds")]
    assert f"user {round(10_000 * -math.expm1(-256 * 7.5 / 10_000)):,}" in note


@pytest.mark.parametrize("example", ["ogbn-mag.yaml", "quickstart-hetero.yaml"])
def test_distgnn_plan_prints_per_type_items(
    example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "--json", str(EXAMPLES / example)]) == 0
    plan = json.loads(capsys.readouterr().out)
    (role,) = [r for r in plan["roles"] if r["role"] == "trainer"]
    whats = [i["what"] for i in role["items"]]
    for prefix in (
        "activations of paper (",
        "activations of author (",
        "embedding lookups of author (",
        "prefetched typed batches (",
    ):
        assert any(w.startswith(prefix) for w in whats), prefix
    assert not any(w == "activations (estimate)" for w in whats)
    if example == "ogbn-mag.yaml":  # GPU trainers served by GPU samplers: the bounds
        assert any(w.startswith("fixed-shape features of paper (") for w in whats)
        assert any("at the bound caps" in w for w in whats)
    assert any(n.startswith("typed batch of") for n in plan["notes"])


def test_typed_hops_sizes() -> None:
    hops = TypedHops({"a": [4.0, 10.0, 30.0]}, {("a", "r", "a"): [10.0, 30.0]})
    assert hops.num_layers == 2
    assert (hops.node_cap("a"), hops.target_cap("a")) == (44.0, 14.0)
    assert (hops.dst_rows(0, "a"), hops.dst_rows(1, "a")) == (14.0, 4.0)
    assert (hops.layer_edges(0, ("a", "r", "a")), hops.layer_edges(1, ("a", "r", "a"))) == (
        40.0,
        10.0,
    )
    assert replace(hops, nodes={"a": [1.0, 2.0, 3.0]}).node_slots == 6.0


def test_a_typed_link_job_keeps_the_homogeneous_trainer(capsys: pytest.CaptureFixture[str]) -> None:
    link = EXAMPLES / "quickstart-hetero-link.yaml"
    assert main(["plan", "--json", str(link)]) == 0
    plan = json.loads(capsys.readouterr().out)
    (role,) = [r for r in plan["roles"] if r["role"] == "trainer"]
    whats = [i["what"] for i in role["items"]]
    assert "activations (estimate)" in whats
    assert not any(w.startswith(("activations of ", "prefetched typed")) for w in whats)
    notes = plan["notes"]
    assert any("a link-prediction trainer of a typed graph" in n for n in notes)
    assert not any(n.startswith(("typed batch", "feature table per holder")) for n in notes)
