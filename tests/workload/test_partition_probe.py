"""The partition Job's sampling probe: exact neighbour draws, and figures that add up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from distgnn_api.spec import SyntheticDataset, parse_spec
from distgnn_workload.data.synthetic import generate
from distgnn_workload.partition import PartitionStore
from distgnn_workload.partition.probe import probe, sample_hops
from distgnn_workload.partition.writer import write_partitions


def test_each_node_gets_min_fanout_degree_distinct_neighbours() -> None:
    g = generate(SyntheticDataset(num_nodes=400, num_edges=3000, num_features=4, num_classes=3))
    rng = np.random.default_rng(1)
    seeds = np.arange(0, 400, 7, dtype=np.int64)
    fanout = 6
    nodes = sample_hops(g.indptr, g.indices, seeds, [fanout], rng)
    hop = nodes[len(seeds) :]
    deg = np.diff(g.indptr)[seeds]
    sizes = np.minimum(deg, fanout)
    assert len(hop) == sizes.sum()
    at = 0
    for s, k in zip(seeds, sizes, strict=True):
        got = hop[at : at + k]
        at += k
        assert len(np.unique(got)) == k, "without replacement"
        assert np.isin(got, g.indices[g.indptr[s] : g.indptr[s + 1]]).all()
    # Every neighbour of a node with a large degree is drawn about equally often.
    hub = int(np.argmax(np.diff(g.indptr)))
    row = g.indices[g.indptr[hub] : g.indptr[hub + 1]]
    counts = np.zeros(400, dtype=np.int64)
    for _ in range(400):
        got = sample_hops(g.indptr, g.indices, np.array([hub]), [2], rng)[1:]
        counts += np.bincount(got, minlength=400)
    expected = 400 * 2 / len(row)
    assert np.all(np.abs(counts[row] - expected) < 6 * np.sqrt(expected))


def job(samplers: int, cache: float) -> Any:
    return parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": 3000, "numEdges": 20000}},
            "partition": {"algorithm": "random", "numPartitions": 2},
            "samplers": {"replicas": samplers, "cacheRatio": cache},
            "trainers": {"replicas": 2},
            "model": {"numLayers": 2, "fanout": [5, 3]},
            "training": {"batchSize": 16},
        }
    )


def test_probe_figures_add_up(tmp_path: Path) -> None:
    spec = job(2, 0.1)
    assert spec.dataset.synthetic is not None
    g = generate(spec.dataset.synthetic)
    store = write_partitions(tmp_path / "s", g, 2, spec=spec.partition)
    found = probe(store, spec)
    assert found is not None
    assert (found["holders"], found["batch_size"], found["fanout"]) == (2, 16, [5, 3])
    caps = 16 * (1 + 5 + 15)
    assert 16 < found["distinct_nodes"] <= caps
    # A random half of the graph is remote: about half of the sampled nodes, seeds excluded.
    assert 0.3 * found["distinct_nodes"] < found["remote_nodes"] < 0.6 * found["distinct_nodes"]
    assert 0.0 <= found["cache_hit_rate"] <= 1.0
    full = probe(PartitionStore.open(tmp_path / "s"), job(2, 1.0))
    assert full is not None
    assert full["cache_hit_rate"] == 1.0
    none = probe(store, job(1, 0.1))
    assert none is not None
    assert none["remote_nodes"] == 0.0
