"""The capacity plan's GPU terms against figures worked out by hand for a small job: the
CUDA-graph pools, the static samplers' tables and blocks, the evaluation's allocator reserve
and the CUDA runtime's host pages. Each expected figure is written out from the arrays the
workload allocates (the line names them), not taken from the model."""

from __future__ import annotations

import math
from typing import Any

from distgnn_api.capacity import build_plan
from distgnn_api.gpu_sampler_memory import STATIC_SAMPLE_TEMPS
from distgnn_api.graph_size_sources import from_spec
from distgnn_api.pod_memory import CUDA_CONTEXT_BYTES, CUDA_HOST_BYTES
from distgnn_api.spec import DistGNNJobSpec, parse_spec

# 1000 nodes, 10000 stored edges, 16 features, 4 classes; batch 10, fanout [3, 2]: hop
# capacities 10, 30, 60 (node_cap 100, edge_cap 90, target_cap 40).
BASE: dict[str, Any] = {
    "dataset": {"synthetic": {"numNodes": 1000, "numEdges": 5000, "numFeatures": 16,
                              "numClasses": 4, "trainFraction": 0.1}},
    "partition": {"algorithm": "random"},
    "model": {"hiddenChannels": 8, "numLayers": 2, "fanout": [3, 2]},
    "training": {"batchSize": 10},
}  # fmt: skip
# sample_static: int64 node_ids (101), src and dst (91 each), target_ptr (42), and the last
# hop's 60 draws in STATIC_SAMPLE_TEMPS int64 temporaries
STATIC_SAMPLE = 8 * (101 + 2 * 91 + 42 + STATIC_SAMPLE_TEMPS * 60)
# NeighborSampler: int64 indptr with a padding id (1002), int32 id table (1001)
TABLES = 1002 * 8 + 1001 * 4


def spec(**changes: Any) -> DistGNNJobSpec:
    return parse_spec({**BASE, **changes})


def gpu_items(s: DistGNNJobSpec, role: str) -> dict[str, int]:
    g = from_spec(s)
    assert g is not None
    r = build_plan(s, g).role(role)
    assert r is not None
    return {i.what: i.bytes for i in r.items if i.where == "gpu"}


def worker() -> DistGNNJobSpec:
    return spec(samplers={"replicas": 0}, trainers={"replicas": 1, "gpusPerPod": 1})


def test_a_captured_training_step_holds_its_activations_twice() -> None:
    items = gpu_items(worker(), "trainer")
    acts = items["activations (estimate)"]
    assert acts > 0
    assert items["CUDA-graph private pool (the captured step's activations)"] == acts


def test_prefetched_batches_of_a_captured_step_hold_their_padded_index() -> None:
    # pad_hops: per layer int64 src and dst at the edge capacity and ptr at the targets' + 2
    # (layer 0: 90, 90, 42; layer 1: 30, 30, 12); the edges widened from int32 to int64
    per_batch = 8 * (90 + 90 + 42 + 30 + 30 + 12) + 4 * 2 * 90
    trainers = {"replicas": 1, "gpusPerPod": 1, "prefetch": 2}
    for samplers in ({"replicas": 0}, {"replicas": 1, "gpusPerPod": 1}):
        items = gpu_items(spec(samplers=samplers, trainers=trainers), "trainer")
        what = "prefetched batches' fixed-shape index and int64 edges (2 + 2)"
        assert items[what] == 4 * per_batch


def test_eager_steps_have_no_graph_pool() -> None:
    items = gpu_items(
        spec(samplers={"replicas": 0}, trainers={"replicas": 1, "gpusPerPod": 1},
             model={**BASE["model"], "arch": "gcn"}),
        "trainer",
    )  # fmt: skip
    assert not any("private pool" in what or "fixed-shape" in what for what in items)


def test_a_worker_mode_trainer_has_one_static_sampler() -> None:
    items = gpu_items(worker(), "trainer")
    assert items["1 sampler(s): indptr copy and id table per node"] == TABLES
    assert items["1 sampler(s): static sampling, warm-up blocks and CUDA-graph pool"] == (
        2 * STATIC_SAMPLE
    )
    # its batches go into the prefetched batches: no per-stream gather
    assert not any("concurrent request" in what for what in items)
    # the batch launched ahead holds a copy of the outputs: node_ids, src, dst, target_ptr
    launched = items["a launched batch's sampler outputs (copied out of the CUDA graph's)"]
    assert launched == 8 * (101 + 2 * 91 + 42)


def test_a_sampler_server_has_one_sampler_and_one_gather_per_concurrent_request() -> None:
    s = spec(samplers={"replicas": 1, "gpusPerPod": 1, "concurrency": 3},
             trainers={"replicas": 1, "gpusPerPod": 1})  # fmt: skip
    items = gpu_items(s, "sampler")
    assert items["3 sampler(s): indptr copy and id table per node"] == 3 * TABLES
    assert items["3 sampler(s): static sampling, warm-up blocks and CUDA-graph pool"] == (
        3 * 2 * STATIC_SAMPLE
    )
    assert not any("launched batch" in what for what in items)  # a server cuts at once
    # distinct nodes among the 100 draws of an expected batch, 16 float32 features each
    expected_nodes = 1000 * (1 - math.exp(-100 / 1000))
    gathered = items["gathered feature rows of 3 concurrent request(s), one per stream"]
    assert gathered == 3 * round(expected_nodes) * 16 * 4


def test_cpu_holders_have_no_gpu_sampler_terms() -> None:
    s = spec(samplers={"replicas": 1}, trainers={"replicas": 1})
    g = from_spec(s)
    assert g is not None
    sampler = build_plan(s, g).role("sampler")
    assert sampler is not None
    assert not any("sampler(s)" in i.what or "CUDA" in i.what for i in sampler.items)


def test_gpu_evaluation_keeps_a_second_chunk_of_source_rows_and_the_degrees() -> None:
    items = gpu_items(worker(), "trainer")
    # layer 0 (16 -> 8) of 1 rank, float32: all 1000 nodes' rows, two chunks' source rows
    # (1000 each: the allocator's second segment), the 1000 x 8 output, the chunk's
    # aggregate and output, its int64 block, and every node's int64 in-degree
    layer0 = 1000 * 16 * 4 + 2 * 1000 * 16 * 4 + 1000 * 8 * 4 + 2 * 1000 * 8 * 4 + 2 * 10000 * 8
    assert items["full-neighbourhood evaluation (largest layer)"] == layer0 + 1000 * 8


def test_every_cuda_process_has_its_context_and_host_pages() -> None:
    s = spec(samplers={"replicas": 1, "gpusPerPod": 1}, trainers={"replicas": 1, "gpusPerPod": 1})
    g = from_spec(s)
    assert g is not None
    plan = build_plan(s, g)
    for role in ("sampler", "trainer"):
        r = plan.role(role)
        assert r is not None
        host = {i.what: i.bytes for i in r.items if i.where == "host"}
        gpu = {i.what: i.bytes for i in r.items if i.where == "gpu"}
        assert host["CUDA runtime on the host (driver maps, kernel images, pinned)"] == (
            CUDA_HOST_BYTES
        )
        assert gpu["CUDA context (estimate)"] == CUDA_CONTEXT_BYTES
