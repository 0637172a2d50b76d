"""The capacity plan against figures worked out by hand for a small job.

The expected numbers are written out from the layouts the workload allocates (each line says
which array), not taken from the model: a change in either shows up here.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from distgnn_api.capacity import GIB, SAMPLER_PROCESS_BYTES, TRAINER_PROCESS_BYTES, build_plan
from distgnn_api.capacity_check import check
from distgnn_api.graph_size import SamplingProbe
from distgnn_api.graph_size_sources import GraphSizeError, from_meta, from_spec, resolve
from distgnn_api.partition_cost import (
    METIS_SAMPLED_BYTES_PER_EDGE,
    OOC_BUCKET_EDGES,
    OOC_BYTES_PER_BUCKET_EDGE,
    OOC_BYTES_PER_NODE,
    OOC_METIS_BYTES_PER_NODE,
    OOC_METIS_CHUNK_BYTES,
    PROCESS_BYTES,
    ooc_bucket_edges,
    out_of_core,
    partition_cost,
)
from distgnn_api.pod_memory import CUDA_HOST_BYTES
from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_api.traffic import seeds_per_second, traffic
from tests.api.specs import spec_from

# 1000 nodes, 5000 undirected edges (10000 stored), 16 features, 4 classes, 100 train nodes;
# 2 CPU samplers holding one random partition each, 2 CPU trainers, batch 10, fanout [3, 2].
SMALL: dict[str, Any] = {
    "dataset": {
        "synthetic": {
            "numNodes": 1000,
            "numEdges": 5000,
            "numFeatures": 16,
            "numClasses": 4,
            "trainFraction": 0.1,
        }
    },
    "partition": {"algorithm": "random"},
    "samplers": {"replicas": 2, "cacheRatio": 0.5},
    "trainers": {"replicas": 2, "gpusPerPod": 0},
    "model": {"hiddenChannels": 8, "numLayers": 2, "fanout": [3, 2]},
    "training": {"batchSize": 10},
}


def small(**changes: Any) -> DistGNNJobSpec:
    return spec_from(SMALL, **changes)


# One mini-batch as expected on the host: 10 seeds, 30 then 60 sampled edges (fanout 3 and 2,
# the mean degree is 10); distinct nodes among the 10, 40 and 100 draws from 1000 nodes.
D1 = 1000 * (1 - math.exp(-40 / 1000))
D2 = 1000 * (1 - math.exp(-100 / 1000))
BATCH = round(D2 * 8 + 2 * 90 * 4 + (D1 + 1) * 8 + D2 * 16 * 4 + 10 * 8)
# The same at the layout's capacities (GPU buffers): hops of 10, 30, 60 nodes.
BATCH_CAPS = 100 * 8 + 2 * 90 * 4 + (10 + 30 + 1) * 8 + 100 * 16 * 4 + 10 * 8
PARAMS = (2 * 16 * 8 + 8) + (2 * 8 * 4 + 4)  # SAGE: lin_l W + bias, lin_r W; 16->8->4


def test_graph_size_from_the_spec() -> None:
    g = from_spec(small())
    assert g is not None
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_train_nodes) == (1000, 10000, 16, 100)
    assert g.index_bytes == 4


def test_sampler_pod_memory_by_hand() -> None:
    plan = build_plan(small(), from_spec_or_fail(small()))
    sampler = plan.role("sampler")
    assert sampler is not None
    assert plan.shapes.replicate
    steady = (
        500 * 16 * 4  # owned feature rows (500 of 1000 nodes), float32
        + 1000 * 4  # slot map, int32 per node
        + 1000 * 8  # labels, int64 per node
        + 501 * 8 + 5000 * 4  # owned CSR: int64 indptr, int32 ids
        + 500 * 8  # split ids, int64
        + 250 * 16 * 4  # hot cache: 0.5 of the 500 remote rows
        + 1001 * 8 + 10000 * 4  # replicated topology
        + 1 * 5 * round(D2) * 16 * 4  # feature slots: 1 peer x (concurrency 4 + 1), touched rows
        + 2 * 5 * BATCH  # batch slots: 2 trainers x 5
    )  # fmt: skip
    load_staging = 2 * 500 * 16 * 4  # the largest transient: float32 copy + cat
    assert sampler.host_bytes == SAMPLER_PROCESS_BYTES + steady + load_staging
    assert sampler.gpu_bytes == 0


def test_trainer_pod_memory_by_hand() -> None:
    plan = build_plan(small(), from_spec_or_fail(small()))
    trainer = plan.role("trainer")
    assert trainer is not None
    # eager steps on the CPU: layer 0's targets are hops 0 and 1 (+1 dump row), 90 edges;
    # layer 1's the seeds (+1), 30 edges
    t0, t1 = D1 + 1, 10 + 1
    acts = (4 * t0 * 8 * 4 + 90 * 8 + t0 * 16 * 4) + (4 * t1 * 4 * 4 + 30 * 8 + t1 * 8 * 4)
    # full-neighbourhood test evaluation afterwards, its largest layer (the first): all 1000
    # nodes' 16 features gathered, a chunk's source rows, the rank's 500 x 8 outputs, the
    # chunk's aggregate and output, its block of 10000 int64 sources and local ids
    evaluation = 1000 * 16 * 4 * 2 + 500 * 8 * 4 + 2 * 1000 * 8 * 4 + 2 * 10000 * 8
    evaluation += 1000 * 8  # every node's in-degree, int64
    # ... and beside it the store pages it reads: int64 indptr, int32 ids, the rank's 500
    # feature rows, and 16 bytes per node of labels and masks
    evaluation += 1001 * 8 + 10000 * 4 + 500 * 16 * 4 + 1000 * 16
    # prefetch 4, the batch in the step and the one being produced
    batches = (4 + 2) * BATCH
    # the 2 samplers' batch slots for this trainer (concurrency 4 + 1 each), mapped and read
    slots = 2 * 5 * BATCH
    expected = TRAINER_PROCESS_BYTES + 16 * PARAMS + round(acts) + batches + slots + evaluation
    assert trainer.host_bytes == expected


def test_worker_mode_trainer_holds_the_partition_on_its_gpus() -> None:
    spec = small(samplers={"replicas": 0}, trainers={"replicas": 2, "gpusPerPod": 2})
    plan = build_plan(spec, from_spec_or_fail(spec))
    trainer = plan.role("trainer")
    assert trainer is not None
    assert plan.role("sampler") is None
    assert trainer.processes_per_pod == 2
    # each process loads its pod's 500 nodes onto its own GPU: owned rows and the cache
    gpu_items = {i.what: i.bytes for i in trainer.items if i.where == "gpu"}
    assert gpu_items["owned feature rows"] == 500 * 16 * 4
    assert gpu_items["replicated topology"] == 1001 * 8 + 10000 * 4
    # GPU buffers are allocated at the layout's capacities
    assert gpu_items["prefetched batches (4 + 2 in use)"] == 6 * BATCH_CAPS
    # x (100 rows + dump), per layer src/dst/ptr: 2*90 + 40+2, then 2*30 + 10+2; labels
    assert gpu_items["CUDA-graph static inputs"] == 101 * 16 * 4 + (222 + 72) * 8 + 10 * 8
    # remote rows over the feature exchange: 3 rounds in flight, rows in and out, each at
    # most the layout's 100 rows; no shared slots
    assert gpu_items["feature exchange buffers (3 rounds, rows in and out)"] == 3 * 2 * 100 * 16 * 4
    assert not any(what.startswith("feature slots") for what in gpu_items)
    assert trainer.host_bytes == 2 * (
        TRAINER_PROCESS_BYTES
        + CUDA_HOST_BYTES  # the CUDA runtime's host pages, per CUDA process
        + 501 * 8 + 5000 * 4 + 500 * 8  # CSR and split ids on the host
        # the largest host peak: evaluation reading the store (topology, this rank's 250
        # feature rows of 4 processes, labels and masks), above load staging (64,000) and
        # topology staging (48,008)
        + 1001 * 8 + 10000 * 4 + 250 * 16 * 4 + 1000 * 16
    )  # fmt: skip


def test_partition_job_and_volume_by_hand() -> None:
    spec = small()
    plan = build_plan(spec, from_spec_or_fail(spec))
    part = plan.role("partition")
    assert part is not None
    graph = 1001 * 8 + 10000 * 4 + 1000 * (16 * 4 + 8 + 3)  # GraphData arrays
    writer = 1000 * (4 + 4 + 4 + 8 + 1)  # id maps, partition of each node, indptr, halo
    # the sampling probe's store pages (int64 indptr, int32 ids) outweigh the id maps
    probe = 1001 * 8 + 10000 * 4
    assert part.host_bytes == PROCESS_BYTES + graph + max(writer, probe)
    store = (
        1001 * 8 + 10000 * 4  # topology/
        + 2 * 1000 * 4 + 1000 * 4  # orig_ids, new_ids, partition_book
        + (1000 + 2) * 8 + 10000 * 4  # part-*/indptr.npy, indices.npy
        + 1000 * (16 * 4 + 8 + 3 + 4)  # features, labels, 3 masks, orig_ids
        + (5 + 2 * 8) * 128  # .npy headers
    )  # fmt: skip
    assert part.disk_bytes == store
    assert plan.volume_bytes == store + 2 * 12 * PARAMS


def test_traffic_by_hand() -> None:
    spec = small()
    plan = build_plan(spec, from_spec_or_fail(spec))
    t = traffic(spec, plan)
    remote = (D2 - 10) * 0.5 * 0.5  # random partition of 2, cache 0.5
    assert t.per_batch["remote feature rows"] == pytest.approx(remote * (16 * 4 + 8))
    # seeds out; ids and features of every node, int32 edges, the targets' ptr, labels back
    expected_batch = 10 * 8 + D2 * (8 + 64) + 90 * 2 * 4 + (D1 + 1) * 8 + 80
    assert t.per_batch["mini-batches (sampler to trainer)"] == pytest.approx(expected_batch)
    assert t.per_batch["gradients (ring all-reduce)"] == pytest.approx(2 * 1 / 2 * PARAMS * 4)
    assert "sampling requests" not in t.per_batch  # the topology is replicated
    assert t.steps_per_epoch == 5  # 100 seeds / (10 x 2 trainers)
    assert t.per_epoch["gradients (ring all-reduce)"] == pytest.approx(10 * PARAMS * 4)


def test_hop_by_hop_sampling_requests() -> None:
    spec = small(samplers={"replicateTopology": "never"})
    plan = build_plan(spec, from_spec_or_fail(spec))
    t = traffic(spec, plan)
    # frontiers of 10 and 30 nodes, half remote: ids out, 3 and 2 neighbours each back
    assert t.per_batch["sampling requests"] == pytest.approx(
        10 * 0.5 * 8 * (1 + 3) + 30 * 0.5 * 8 * (1 + 2)
    )


def test_shortfalls_name_role_resource_and_amount() -> None:
    spec = small(trainers={"resources": {"limits": {"memory": "512Mi"}}})
    plan = build_plan(spec, from_spec_or_fail(spec))
    found = check(spec, plan, 80 * GIB)
    assert [(s.role, s.resource, s.field) for s in found] == [
        ("trainer", "memory", "spec.trainers.resources.limits.memory")
    ]
    trainer = plan.role("trainer")
    assert trainer is not None
    assert found[0].short == trainer.host_bytes - 512 * 2**20
    assert "trainer: needs" in found[0].message
    assert "short by" in found[0].message


def test_gpu_and_volume_shortfalls() -> None:
    spec = small(trainers={"gpusPerPod": 1}, storage={"size": "100Ki"})
    plan = build_plan(spec, from_spec_or_fail(spec), gpu_memory=1 << 20)
    found = {(s.role, s.resource) for s in check(spec, plan, 1 << 20)}
    assert found == {("trainer", "gpu-memory"), ("volume", "storage")}


def test_sizes_from_meta_and_counts(tmp_path: Any) -> None:
    ogb = parse_spec({"dataset": {"ogb": {"path": "datasets/mine"}}})
    assert from_spec(ogb) is None
    with pytest.raises(GraphSizeError, match="--nodes, --edges"):
        resolve(ogb)
    g = resolve(ogb, nodes=10, edges=20, features=3)
    assert (g.num_nodes, g.num_edges, g.num_features) == (10, 40, 3)
    meta = tmp_path / "META.json"
    meta.write_text(
        '{"num_nodes": 7, "num_edges": 12, "num_features": 5, "num_classes": 3, '
        '"num_train_nodes": 2, "edge_cut_fraction": 0.25}'
    )
    g = from_meta(tmp_path)
    assert (g.num_nodes, g.num_edges, g.edge_cut_fraction) == (7, 12, 0.25)
    with pytest.raises(GraphSizeError, match="no such file"):
        from_meta(tmp_path / "missing.json")
    products = from_spec(parse_spec({"dataset": {"ogb": {"path": "datasets/ogbn_products"}}}))
    assert products is not None
    assert products.num_edges == 2 * 61_859_140


def test_seeds_per_second_says_when_it_cannot() -> None:
    spec = small()
    assert isinstance(seeds_per_second(spec, build_plan(spec, from_spec_or_fail(spec))), str)
    gpu = small(trainers={"gpusPerPod": 1}, samplers={"cacheRatio": 1.0})
    rate = seeds_per_second(gpu, build_plan(gpu, from_spec_or_fail(gpu)))
    assert not isinstance(rate, str)
    # server mode on 2 GPUs, 194k/GPU at fanout 15/10/5 (915 edges a seed), fp32; here 3 + 6
    assert rate.per_gpu == pytest.approx(194_000 * 191 / 265 / (9 / 915))
    assert "extrapolated" in rate.basis


def from_spec_or_fail(spec: DistGNNJobSpec) -> Any:
    g = from_spec(spec)
    assert g is not None
    return g


def test_a_matching_sampling_probe_replaces_the_estimates() -> None:
    spec = small()
    probe = SamplingProbe(
        holders=2, batch_size=10, fanout=(3, 2), cache_ratio=0.5,
        distinct_nodes=60.0, remote_nodes=20.0, cache_hit_rate=0.75,
    )  # fmt: skip
    g = replace(from_spec_or_fail(spec), probe=probe)
    plan = build_plan(spec, g)
    assert sum(plan.shapes.expected_nodes) == pytest.approx(60.0)
    assert plan.shapes.expected_nodes[0] == 10
    t = traffic(spec, plan)
    assert t.per_batch["remote feature rows"] == pytest.approx(20 * 0.25 * (16 * 4 + 8))
    assert t.remote_share == pytest.approx(20 / 60)
    assert "probe" in t.remote_share_source
    # Batches of another shape: the probe does not apply.
    other = small(training={"batchSize": 20})
    assert sum(build_plan(other, g).shapes.expected_nodes) != pytest.approx(60.0)


def test_out_of_core_partition_when_asked_or_too_large() -> None:
    spec = small(partition={"outOfCore": "always"})
    g = from_spec_or_fail(spec)
    cost = partition_cost(spec, g)
    assert cost.out_of_core
    assert cost.spill_bytes == 10000 * 2 * 4  # (src, dst) int32 per stored edge
    # one bucket: each of the 2 partitions' 5000 edges
    assert cost.peak_bytes == (
        PROCESS_BYTES + 1000 * OOC_BYTES_PER_NODE + 5000 * OOC_BYTES_PER_BUCKET_EDGE
    )  # fmt: skip
    assert ooc_bucket_edges(3 * OOC_BUCKET_EDGES, 1) == OOC_BUCKET_EDGES
    assert ooc_bucket_edges(OOC_BUCKET_EDGES + 2, 1) == OOC_BUCKET_EDGES // 2 + 1  # 2 buckets
    in_memory = partition_cost(small(partition={"outOfCore": "never"}), g)
    assert not in_memory.out_of_core
    # auto: only when the in-memory peak exceeds the partition container's memory
    limit = in_memory.peak_bytes
    fits = small(partition={"resources": {"limits": {"memory": str(limit)}}})
    assert not partition_cost(fits, g).out_of_core
    tight = small(partition={"resources": {"limits": {"memory": str(limit - 1)}}})
    found = partition_cost(tight, g)
    assert found.out_of_core
    assert "exceeds partition.resources' memory" in found.out_of_core_why
    plan = build_plan(tight, g)
    assert any("partition out of core" in n for n in plan.notes)
    hetero = parse_spec({"dataset": {"syntheticMag": {"scale": 0.001}}, "model": {"arch": "rsage"},
                         "partition": {"resources": {"limits": {"memory": "1Ki"}}}})  # fmt: skip
    assert not out_of_core(hetero, from_spec(hetero))[0]


def test_out_of_core_metis_on_a_sample_costs_its_sample_and_passes() -> None:
    rand = small(partition={"outOfCore": "always", "algorithm": "random"})
    g = replace(from_spec_or_fail(rand), num_nodes=10_000_000, num_edges=3_000_000_000)
    sampled = small(
        partition={"outOfCore": "always", "algorithm": "metis", "metisSampleEdges": 40_000_000}
    )
    base, cost = partition_cost(rand, g), partition_cost(sampled, g)
    assert base.metis_bytes == 0
    assert base.metis_edges == 0
    assert cost.metis_edges == 40_000_000
    assert cost.metis_bytes == max(
        40_000_000 * METIS_SAMPLED_BYTES_PER_EDGE,
        10_000_000 * OOC_METIS_BYTES_PER_NODE + OOC_METIS_CHUNK_BYTES,
    )
    assert cost.peak_bytes == PROCESS_BYTES + base.graph_bytes + max(
        base.writer_bytes, cost.metis_bytes
    )
    assert cost.seconds > base.seconds  # five more passes over the edges
    role = build_plan(sampled, g).role("partition")
    assert role is not None
    assert any("40,000,000-edge sample" in item.what for item in role.items)
    assert role.host_bytes == cost.peak_bytes


def test_a_sample_too_large_for_the_partition_job_is_named() -> None:
    g = replace(from_spec_or_fail(small()), num_nodes=10_000_000, num_edges=3_000_000_000)
    partition = {"outOfCore": "always", "algorithm": "metis", "metisSampleEdges": 40_000_000}
    need = partition_cost(small(partition=partition), g).peak_bytes
    tight = {**partition, "resources": {"limits": {"memory": str(need - 1)}}}
    spec = small(partition=tight)
    found = [s for s in check(spec, build_plan(spec, g), 80 * GIB) if s.role == "partition"]
    assert len(found) == 1
    assert found[0].field == "spec.partition.resources.limits.memory"
    assert "or lower spec.partition.metisSampleEdges=40000000" in found[0].message
    rand = small(partition={"outOfCore": "always", "resources": {"limits": {"memory": "1Mi"}}})
    (short,) = [s for s in check(rand, build_plan(rand, g), 80 * GIB) if s.role == "partition"]
    assert "metisSampleEdges" not in short.message


def test_a_feature_budget_below_the_table_splits_it_in_the_plan() -> None:
    """750 held rows (500 owned, half the 500 remote) of 64 bytes; 12,800 bytes on the GPU."""
    gpu_holders = {"gpusPerPod": 1, "featureMemory": 12800}
    spec = small(samplers=gpu_holders)
    plan = build_plan(spec, from_spec_or_fail(spec))
    sampler = plan.role("sampler")
    assert sampler is not None
    items = {i.what: i for i in sampler.items}
    assert items["feature table, GPU tier (hottest rows, featureMemory)"].bytes == 200 * 64
    host = items["feature table, pinned host tier (every row, 128-byte aligned)"]
    assert (host.bytes, host.where) == (750 * 128, "host")
    assert "owned feature rows" not in items
    assert any("feature table per holder" in n and "(27%) on the GPU" in n for n in plan.notes)
    whole = small(samplers={"gpusPerPod": 1, "featureMemory": "1Gi"})
    untiered = build_plan(whole, from_spec_or_fail(whole)).role("sampler")
    assert untiered is not None
    assert "owned feature rows" in {i.what for i in untiered.items}
