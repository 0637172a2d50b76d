"""The citation2-shaped link generator: exact sizes, a simple graph, determinism, and links
whose endpoints' features agree (what a GNN's dot decoder learns; the reference trainer's
MRR on it is in tests/workload/test_link_reference.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distgnn_api.link import CITATION2_EDGES, CITATION2_NODES, SyntheticLinkDataset
from distgnn_workload.data.host_threads import ENV_THREADS
from distgnn_workload.data.synthetic_link import DRAW_CHUNK, FEATURE_ROWS, generate_link


def test_sizes_dtypes_and_a_simple_graph() -> None:
    spec = SyntheticLinkDataset(scale=0.002, num_features=24)
    data = generate_link(spec)
    assert data.num_nodes == round(CITATION2_NODES * 0.002) == spec.num_nodes
    assert data.num_edges == round(CITATION2_EDGES * 0.002) == spec.num_edges
    assert data.x.shape == (data.num_nodes, 24)
    assert data.x.dtype == np.float32
    assert data.src.dtype == data.dst.dtype == np.int64
    assert not np.any(data.src == data.dst)
    keys = np.minimum(data.src, data.dst) * data.num_nodes + np.maximum(data.src, data.dst)
    assert len(np.unique(keys)) == data.num_edges  # each unordered pair once
    data.validate()


def test_same_seed_same_graph_other_seed_other_graph() -> None:
    a = generate_link(SyntheticLinkDataset(scale=0.0005, seed=3))
    b = generate_link(SyntheticLinkDataset(scale=0.0005, seed=3))
    c = generate_link(SyntheticLinkDataset(scale=0.0005, seed=4))
    assert np.array_equal(a.src, b.src)
    assert np.array_equal(a.dst, b.dst)
    assert np.array_equal(a.x, b.x)
    assert not np.array_equal(a.dst, c.dst)


def test_linked_nodes_have_more_similar_features_than_random_pairs() -> None:
    data = generate_link(SyntheticLinkDataset(scale=0.001))
    x = data.x / np.linalg.norm(data.x, axis=1, keepdims=True)
    linked = (x[data.src] * x[data.dst]).sum(1)
    rng = np.random.default_rng(0)
    other = rng.integers(0, data.num_nodes, data.num_edges)
    random = (x[data.src] * x[other]).sum(1)
    assert linked.mean() > random.mean() + 0.2
    # Popular sources: the degree distribution is skewed.
    degree = np.bincount(np.concatenate([data.src, data.dst]), minlength=data.num_nodes)
    assert degree.max() > 4 * degree.mean()


def test_the_graph_does_not_depend_on_the_number_of_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = SyntheticLinkDataset(scale=0.006, seed=5)
    monkeypatch.setenv(ENV_THREADS, "1")
    one = generate_link(spec)
    monkeypatch.setenv(ENV_THREADS, "3")
    three = generate_link(spec)
    assert spec.num_edges > DRAW_CHUNK
    assert spec.num_nodes > FEATURE_ROWS
    assert np.array_equal(one.src, three.src)
    assert np.array_equal(one.dst, three.dst)
    assert np.array_equal(one.x, three.x)
