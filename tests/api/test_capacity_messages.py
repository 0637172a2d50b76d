"""The capacity plan's shortfall messages: sizes bounded by the graph, and each shortfall's
own way out (the fields of its role and resource, not one advice for all)."""

from __future__ import annotations

from typing import Any

from distgnn_api.capacity import GIB, build_plan
from distgnn_api.capacity_check import Shortfall, check
from distgnn_api.graph_size_sources import from_spec
from distgnn_api.pod_memory import edge_caps, hop_caps
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.status.capacity_policy import message
from tests.api.specs import spec_from

# A small graph (10,000 nodes, 50,000 undirected edges) with a fanout whose product is far
# larger than the graph: 1024 seeds x 50 x 50 x 50 = 128 million nodes at the last hop.
WIDE: dict[str, Any] = {
    "dataset": {"synthetic": {"numNodes": 10_000, "numEdges": 50_000, "numFeatures": 100}},
    "samplers": {"replicas": 0},
    "trainers": {"replicas": 2, "gpusPerPod": 1},
    "model": {"numLayers": 3, "fanout": [50, 50, 50]},
    "training": {"batchSize": 1024},
}


def _spec(**changes: Any) -> DistGNNJobSpec:
    return spec_from(WIDE, **changes)


def _found(spec: DistGNNJobSpec, gpu_memory: int = 80 * GIB) -> dict[tuple[str, str], Shortfall]:
    graph = from_spec(spec)
    assert graph is not None
    plan = build_plan(spec, graph, gpu_memory=gpu_memory)
    return {(s.role, s.resource): s for s in check(spec, plan, gpu_memory)}


def test_hop_caps_stop_at_the_graphs_nodes_and_edges() -> None:
    assert hop_caps(1024, [50, 50, 50]) == (1024, 51_200, 2_560_000, 128_000_000)
    nodes = hop_caps(1024, [50, 50, 50], 10_000)
    assert nodes == (1024, 10_000, 10_000, 10_000)
    # every node of a hop draws at most its fanout, and no hop draws more than the graph stores
    assert edge_caps(nodes, [50, 50, 50], 100_000) == (51_200, 100_000, 100_000)
    assert edge_caps(hop_caps(4, [3, 2]), [3, 2]) == (12, 24)


def test_a_fanout_wider_than_the_graph_fits_a_card() -> None:
    spec = _spec()
    graph = from_spec(spec)
    assert graph is not None
    plan = build_plan(spec, graph, gpu_memory=80 * GIB)
    assert max(plan.shapes.hop_caps) == 10_000
    trainer = plan.role("trainer")
    assert trainer is not None
    # 128 million rows of 100 features alone would be 48 GiB; the graph has 10,000 nodes
    assert trainer.gpu_bytes < 2 * GIB
    assert ("trainer", "gpu-memory") not in _found(spec)


def test_each_shortfall_names_its_own_way_out() -> None:
    spec = _spec(
        trainers={"resources": {"limits": {"memory": "64Mi"}}},
        storage={"size": "1Ki"},
        partition={"resources": {"limits": {"memory": "16Mi"}}},
    )
    found = _found(spec, gpu_memory=1 << 20)
    assert set(found) == {
        ("partition", "memory"),
        ("trainer", "memory"),
        ("trainer", "gpu-memory"),
        ("volume", "storage"),
    }
    volume = found["volume", "storage"].message
    assert "raise spec.storage.size to at least" in volume
    assert "spec.storage.claimName" in volume
    gpu = found["trainer", "gpu-memory"].message
    assert "spec.samplers.replicateTopology to never" in gpu  # worker mode: trainers hold it
    assert "spec.training.batchSize" in gpu
    assert "cards with more memory (--gpu-memory)" in gpu
    holder = found["trainer", "memory"].message
    assert "raise spec.trainers.resources.limits.memory to at least" in holder
    assert "spec.trainers.replicas" in holder
    partition = found["partition", "memory"].message
    assert "spec.partition.outOfCore to always" in partition
    for short in found.values():
        assert "cacheRatio" not in short.message or short.resource == "memory"
        assert "raise the limits" not in short.message
    assert "raise the limits" not in message(list(found.values()))


def test_a_sampler_and_a_server_client_trainer_get_their_own_fixes() -> None:
    spec = _spec(
        samplers={"replicas": 2, "resources": {"limits": {"memory": "64Mi"}}},
        trainers={"resources": {"limits": {"memory": "64Mi"}}},
    )
    found = _found(spec)
    sampler = found["sampler", "memory"].message
    assert "add pods (spec.samplers.replicas)" in sampler
    assert "spec.samplers.cacheRatio" in sampler
    trainer = found["trainer", "memory"].message
    assert "spec.trainers.prefetch" in trainer
    assert "cacheRatio" not in trainer
