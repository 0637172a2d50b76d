"""The capacity plan of a typed graph: each featured type's feature table under
``samplers.featureMemory`` and each featureless type's learnable embeddings under
``trainers.embeddingMemory``, against figures worked out by hand.

The job: syntheticMag at scale 0.01 (paper 7,364 nodes with 128 features; author 11,346,
institution 87 and field_of_study 600, featureless), 19,397 nodes on 2 random partitions, so
a holder owns ceil(19,397 / 2) = 9,699 nodes and each type's share of them; embeddings of 16.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from distgnn_api.capacity import GIB, Plan, RolePlan, build_plan
from distgnn_api.capacity_check import check
from distgnn_api.feature_memory import (
    ADAM_STATE_ROWS,
    AUTO_RESERVE_MIN,
    feature_budget,
    host_shards,
    shard_bytes,
    shared_budgets,
)
from distgnn_api.graph_size import GraphSize, NodeTypeSize
from distgnn_api.graph_size_sources import from_spec, resolve
from distgnn_api.pod_memory import CUDA_CONTEXT_BYTES, Item
from distgnn_api.spec import DistGNNJobSpec, SpecError, parse_spec
from tests.api.specs import spec_from, write_shop_store_meta

NODES, OWNED = 19_397, 9_699
DIM = 16
TYPED: dict[str, Any] = {
    "dataset": {"syntheticMag": {"scale": 0.01}},
    "partition": {"algorithm": "random"},
    "samplers": {"replicas": 2, "gpusPerPod": 1, "cacheRatio": 0.0},
    "trainers": {"replicas": 2, "gpusPerPod": 1},
    "model": {"arch": "rsage", "embeddingDim": DIM},
}


def typed(**changes: Any) -> DistGNNJobSpec:
    return spec_from(TYPED, **changes)


def owned(n: int) -> int:
    """A holder's nodes of a type of ``n``: its share of all nodes."""
    return math.ceil(n * OWNED / NODES)


AUTHOR, INSTITUTION, FIELD = owned(11_346), owned(87), owned(600)
"""Rows of each embedding table per training process: 2 holders over 2 processes."""


def plan_of(spec: DistGNNJobSpec, graph: GraphSize | None = None, **kw: Any) -> Plan:
    g = graph or from_spec(spec)
    assert g is not None
    return build_plan(spec, g, **kw)


def role(plan: Plan, name: str) -> RolePlan:
    found = plan.role(name)
    assert found is not None
    return found


def items(plan: Plan, name: str) -> dict[str, Item]:
    return {i.what: i for i in role(plan, name).items}


def embedding_item(plan: Plan, node_type: str) -> Item:
    (found,) = [
        i for i in role(plan, "trainer").items if i.what.startswith(f"embeddings of {node_type} ")
    ]
    return found


def test_the_per_type_counts_come_from_the_shape() -> None:
    mag = parse_spec({**TYPED, "dataset": {"ogb": {"path": "datasets/ogbn_mag"}, "hetero": {}}})
    g = from_spec(mag)
    assert g is not None
    assert [(t.name, t.num_nodes, t.num_features) for t in g.node_types] == [
        ("paper", 736_389, 128),
        ("author", 1_134_649, 0),
        ("institution", 8_740, 0),
        ("field_of_study", 59_965, 0),
    ]
    small = from_spec(typed(dataset={"syntheticMag": {"scale": 0.01, "numFeatures": 64}}))
    assert small is not None
    assert [t.name for t in small.featured_types] == ["paper"]
    assert [(t.num_nodes, t.num_features) for t in small.node_types] == [
        (7_364, 64),
        (11_346, 0),
        (87, 0),
        (600, 0),
    ]
    assert small.num_nodes == NODES
    assert "homogeneous view (every type in one id space, rows of 64 values)" in small.approximate
    # counts given on the command line replace the types': the homogeneous view, said so
    given = resolve(typed(), nodes=5_000)
    assert given.node_types == ()
    assert "embeddings are not modelled" in given.approximate


def test_each_featureless_type_has_its_shard_in_the_trainer() -> None:
    plan = plan_of(typed())
    trainer = items(plan, "trainer")
    for name, rows in (("author", AUTHOR), ("institution", INSTITUTION), ("field_of_study", FIELD)):
        what = f"embeddings of {name} ({rows:,} rows x {DIM}, 2 Adam moments, fp32)"
        assert (trainer[what].bytes, trainer[what].where) == (rows * DIM * 4 * 3, "gpu")
    n_author = 11_346
    routing = trainer["embedding routing of author (owner, local on the device)"]
    assert (routing.bytes, routing.where) == (16 * n_author, "gpu")
    assert trainer["ownership of author (owner, local: int64 per node)"].where == "host"
    # the holders hold no embedding rows: paper's features only
    sampler = items(plan, "sampler")
    assert "owned feature rows" not in sampler
    paper = f"features of paper ({owned(7_364):,} owned + 0 cached rows)"
    assert sampler[paper].bytes == owned(7_364) * 128 * 4
    assert not any("embeddings" in i for i in sampler)
    # a trainer process owns its share of its holder's rows: 2 holders over 4 processes
    four = plan_of(typed(trainers={"gpusPerPod": 2}))
    assert embedding_item(four, "author").bytes == math.ceil(AUTHOR / 2) * DIM * 4 * 3


def test_the_smallest_shards_stay_on_the_gpu_within_embedding_memory() -> None:
    small = shard_bytes(INSTITUTION, DIM, ADAM_STATE_ROWS) + shard_bytes(FIELD, DIM, 2)
    plan = plan_of(typed(trainers={"embeddingMemory": small}))
    author = embedding_item(plan, "author")
    # whole in pinned host memory, each of its 3 tensors in rows padded from 64 to 128 bytes
    assert (author.bytes, author.where) == (AUTHOR * 128 * 3, "host")
    assert embedding_item(plan, "institution").where == "gpu"
    assert embedding_item(plan, "field_of_study").where == "gpu"
    (note,) = [n for n in plan.notes if n.startswith("learnable embeddings")]
    assert f"embeddingMemory {small}, the smallest shards on the device first" in note
    assert "author 0.00 GiB in pinned host memory" in note
    assert "institution 0.00 GiB on the GPU" in note
    # a byte less: field_of_study goes too, institution (the smallest) stays
    tighter = plan_of(typed(trainers={"embeddingMemory": small - 1}))
    assert embedding_item(tighter, "field_of_study").where == "host"
    assert embedding_item(tighter, "institution").where == "gpu"
    unset = plan_of(typed())
    assert all(embedding_item(unset, t).where == "gpu" for t in ("author", "institution"))
    assert any("no embeddingMemory" in n for n in unset.notes)
    # the rule the runtime places by (embeddings/placement.py re-exports it)
    assert host_shards([300, 100, 200], 299) == [True, False, True]


def test_auto_embedding_memory_takes_the_card_less_training_and_what_is_loaded() -> None:
    spec = typed(trainers={"embeddingMemory": "auto"})
    room = shard_bytes(INSTITUTION, DIM, 2) + shard_bytes(FIELD, DIM, 2)
    # a card below 16 GiB keeps 4 GiB for training, past the CUDA context
    card = AUTO_RESERVE_MIN + CUDA_CONTEXT_BYTES + room
    plan = plan_of(spec, gpu_memory=card)
    assert embedding_item(plan, "author").where == "host"
    assert embedding_item(plan, "field_of_study").where == "gpu"
    assert embedding_item(plan_of(spec, gpu_memory=80 * GIB), "author").where == "gpu"
    # in worker mode the trainer's holder loads first: auto leaves what it holds
    worker = typed(samplers={"replicas": 0}, trainers={"embeddingMemory": "auto"})
    worker_plan = plan_of(worker, gpu_memory=card + shard_bytes(AUTHOR, DIM, 2))
    assert embedding_item(worker_plan, "author").where == "host"
    assert embedding_item(plan_of(worker, gpu_memory=card + GIB), "author").where == "gpu"
    # on CPU trainers auto sets no cap; a quantity splits all the same (host tiers)
    cpu = plan_of(typed(trainers={"gpusPerPod": 0, "embeddingMemory": "auto"}))
    assert embedding_item(cpu, "author").bytes == shard_bytes(AUTHOR, DIM, 2)
    cpu_q = plan_of(typed(trainers={"gpusPerPod": 0, "embeddingMemory": room}))
    assert embedding_item(cpu_q, "author").bytes == AUTHOR * 128 * 3
    assert any("in the process's memory" in n for n in cpu_q.notes)


def test_feature_memory_is_shared_by_the_featured_types_in_proportion() -> None:
    """paper (7,364 x 128) and a second featured type, venue (3,000 x 32), 4-byte values."""
    spec = typed(samplers={"featureMemory": 100_000})
    base = from_spec(spec)
    assert base is not None
    venue = NodeTypeSize("venue", 3_000, 32)
    graph = replace(base, num_nodes=NODES + 3_000, node_types=(*base.node_types, venue))
    share = math.ceil((NODES + 3_000) / 2) / (NODES + 3_000)  # a holder's share of all nodes
    paper_rows = math.ceil(7_364 * share)
    venue_rows = math.ceil(3_000 * share)
    tables = {"paper": paper_rows * 512, "venue": venue_rows * 128}
    paper_share = 100_000 * tables["paper"] // sum(tables.values())
    venue_share = 100_000 * tables["venue"] // sum(tables.values())
    assert shared_budgets(100_000, tables) == {"paper": paper_share, "venue": venue_share}
    assert shared_budgets(None, tables) == {"paper": None, "venue": None}
    plan = plan_of(spec, graph)
    sampler = items(plan, "sampler")
    gpu = sampler["features of paper, GPU tier (hottest rows, its share of featureMemory)"]
    assert (gpu.bytes, gpu.where) == (paper_share // 512 * 512, "gpu")
    host = sampler[f"features of paper, pinned host tier ({paper_rows:,} rows, 128-byte aligned)"]
    assert (host.bytes, host.where) == (paper_rows * 512, "host")
    venue_host = sampler[
        f"features of venue, pinned host tier ({venue_rows:,} rows, 128-byte aligned)"
    ]
    assert venue_host.bytes == venue_rows * 128
    (note,) = [n for n in plan.notes if n.startswith("feature tables per holder")]
    assert "featureMemory 100000, shared by the featured types in proportion" in note
    assert "paper 0.00 GiB: 0.00 GiB (" in note
    assert "all of it in pinned host memory, read in place" in note
    # the homogeneous view's table (embeddings counted as rows) is not what the plan shows
    assert not any(n.startswith("feature table per holder") for n in plan.notes)
    # within the budget every type's table is on the GPU
    roomy = plan_of(typed(samplers={"featureMemory": "1Gi"}), graph)
    assert f"features of venue ({venue_rows:,} owned + 0 cached rows)" in items(roomy, "sampler")


def test_a_bad_budget_names_its_field() -> None:
    with pytest.raises(SpecError, match=r"spec\.trainers\.embeddingMemory: 'lots'"):
        typed(trainers={"embeddingMemory": "lots"})
    with pytest.raises(ValueError, match=r"spec\.trainers\.embeddingMemory '-1' is not"):
        feature_budget("-1", GIB, GIB, field="spec.trainers.embeddingMemory")


def test_a_typed_store_gives_its_per_type_counts(tmp_path: Path) -> None:
    """A typed store's META.json (workload/partition/meta.py HeteroPartitionMeta's keys)."""
    write_shop_store_meta(tmp_path)
    spec = parse_spec(
        {
            **TYPED,
            "dataset": {"pyg": {"path": "datasets/shop.pt"}, "hetero": {"targetNodeType": "item"}},
        }
    )
    g = resolve(spec, meta=tmp_path)
    assert [(t.name, t.num_nodes, t.num_features) for t in g.node_types] == [
        ("item", 4_000, 24),
        ("user", 10_000, 0),
    ]
    assert (g.num_nodes, g.num_edges, g.num_features) == (14_000, 60_000, 24)  # item's 24 > 16
    assert g.edge_cut_fraction == 0.4
    assert "homogeneous view" in g.approximate
    plan = build_plan(spec, g)
    # 2 holders own 7,000 nodes each, so 5,000 users; 2 holders over 2 processes
    assert embedding_item(plan, "user").bytes == 5_000 * DIM * 4 * 3
    assert "features of item (2,000 owned + 0 cached rows)" in items(plan, "sampler")


def test_a_gpu_shortfall_names_the_budgets_that_are_unset() -> None:
    def gpu_fixes(spec: DistGNNJobSpec) -> dict[str, str]:
        plan = plan_of(spec, gpu_memory=GIB // 4)
        return {s.role: s.message for s in check(spec, plan, GIB // 4) if s.resource != "memory"}

    unset = gpu_fixes(typed())
    assert "set spec.trainers.embeddingMemory (embedding shards" in unset["trainer"]
    assert "set spec.samplers.featureMemory (feature rows" in unset["sampler"]
    assert "featureMemory" not in unset["trainer"]  # the samplers hold the features
    budgets = {"featureMemory": "auto"}
    both = gpu_fixes(typed(samplers=budgets, trainers={"embeddingMemory": "auto"}))
    assert "embeddingMemory" not in both["trainer"]
    assert "featureMemory" not in both["sampler"]
