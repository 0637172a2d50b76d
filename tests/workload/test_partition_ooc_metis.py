"""METIS on a sampled subgraph, out of core (partition/ooc_metis.py): every node assigned,
node balance within NODE_TOLERANCE, and a cut near in-memory METIS's and far below a random
assignment's on a graph with community structure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data.csr import csr_from_edges
from distgnn_workload.data.stream import StreamedGraph
from distgnn_workload.data.synthetic_stream import stream_synthetic
from distgnn_workload.partition.algorithms import random_assignment
from distgnn_workload.partition.metis import _metis
from distgnn_workload.partition.ooc_metis import (
    NODE_TOLERANCE,
    _admit,
    sample_share,
    sampled_metis_assignment,
)
from tests.support.scripts import load_script

cut_share: Callable[[StreamedGraph, npt.NDArray[np.int32]], float] = load_script(
    Path(__file__).resolve().parents[2] / "benchmarks" / "capacity" / "ooc_metis_cut.py",
    "ooc_metis_cut",
).cut_share
"""The share of edges between partitions, as the capacity benchmark measures it."""


def community_graph(seed: int = 0) -> StreamedGraph:
    spec = SyntheticDataset(
        num_nodes=20_000,
        num_edges=250_000,
        num_features=4,
        num_classes=16,
        homophily=0.8,
        seed=seed,
    )
    return stream_synthetic(spec, chunk=1 << 15)


@pytest.mark.parametrize("k", [4, 8])
def test_cut_near_in_memory_metis_and_far_below_random(k: int) -> None:
    graph = community_graph()
    parts, how = sampled_metis_assignment(graph, k, sample_edges=100_000, seed=3)
    assert parts.shape == (graph.num_nodes,)
    assert parts.min() == 0
    assert parts.max() == k - 1
    loads = np.bincount(parts, minlength=k)
    assert loads.max() <= (1 + NODE_TOLERANCE) * graph.num_nodes / k
    assert 0 < how["sample_nodes"] < graph.num_nodes
    assert len(how["rounds"]) == 4

    src, dst = zip(*graph.edges(), strict=True)
    indptr, indices, _ = csr_from_edges(np.concatenate(src), np.concatenate(dst), graph.num_nodes)
    whole = _metis(indptr, indices.astype(np.int64), k, np.ones((graph.num_nodes, 1), np.int64), 3)
    ours, metis, rand = (
        cut_share(graph, parts),
        cut_share(graph, whole),
        cut_share(graph, random_assignment(graph.num_nodes, k, 3)),
    )
    assert rand > 1 - 1 / k - 0.02
    assert ours < 0.5 * rand, (ours, rand)
    assert ours < metis + 0.06, (ours, metis)


def test_a_sample_covering_the_graph_is_metis_on_the_whole_graph() -> None:
    graph = community_graph(seed=1)
    parts, how = sampled_metis_assignment(graph, 4, sample_edges=10**9, seed=0)
    assert how["sample_nodes"] == graph.num_nodes
    assert how["sample_share"] == 1.0
    assert how["rounds"][0]["moved"] == 0  # nothing left to project
    assert np.bincount(parts, minlength=4).max() <= (1 + NODE_TOLERANCE) * graph.num_nodes / 4


def test_sample_share_and_admission() -> None:
    assert sample_share(100, 400) == 1.0
    assert sample_share(400, 100) == pytest.approx(0.5)
    targets = np.array([0, 0, 0, 1, 1], dtype=np.int32)
    priority = np.array([1, 5, 3, 2, 9])
    ok = _admit(targets, priority, np.array([2, 0]))
    assert ok.tolist() == [False, True, True, False, False]


def test_one_partition_and_too_many() -> None:
    graph = community_graph()
    parts, _ = sampled_metis_assignment(graph, 1, sample_edges=1000)
    assert not parts.any()
    from distgnn_workload.data.errors import DatasetError

    with pytest.raises(DatasetError, match="exceeds the graph's"):
        sampled_metis_assignment(graph, graph.num_nodes + 1, sample_edges=1000)
