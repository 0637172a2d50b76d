"""The synthetic community graph: exact sizes, determinism, homophily, skew, learnability."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import ValidationError

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data import DatasetError, GraphData
from distgnn_workload.data.synthetic import generate


def _spec(**kw: float) -> SyntheticDataset:
    base: dict[str, float] = {
        "num_nodes": 3000,
        "num_edges": 30000,
        "num_features": 16,
        "num_classes": 8,
    }
    base.update(kw)
    return SyntheticDataset.model_validate(base)


def test_sizes_dtypes_and_csr_invariants() -> None:
    spec = _spec(train_fraction=0.1, val_fraction=0.05)
    g = generate(spec)
    assert g.num_nodes == 3000
    assert g.num_undirected_edges == 30000
    assert g.num_edges == 60000
    assert g.x.shape == (3000, 16)
    assert g.x.dtype == np.float32
    assert g.indices.dtype == np.int32
    assert g.indptr.dtype == np.int64
    assert g.num_classes == 8
    assert set(np.unique(g.y).tolist()) == set(range(8))
    g.validate(deep=True)  # symmetric, sorted rows, no self-loops or duplicates
    masks = np.stack([g.train_mask, g.val_mask, g.test_mask])
    assert np.all(masks.sum(axis=0) == 1)  # disjoint and covering
    assert g.train_mask.sum() == 300
    assert g.val_mask.sum() == 150


def test_same_seed_same_graph_other_seed_other_graph() -> None:
    a, b, c = generate(_spec(seed=3)), generate(_spec(seed=3)), generate(_spec(seed=4))
    for name in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not np.array_equal(a.indices, c.indices)
    assert not np.array_equal(a.x, c.x)


@pytest.mark.parametrize("homophily", [0.5, 0.8, 0.95])
def test_homophily_is_the_share_of_intra_community_edges(homophily: float) -> None:
    g = generate(_spec(num_nodes=20000, num_edges=100000, homophily=homophily))
    src = np.repeat(np.arange(g.num_nodes), g.degrees())
    measured = float(np.mean(g.y[src] == g.y[g.indices]))
    assert abs(measured - homophily) < 0.03, measured


def test_degrees_are_skewed() -> None:
    deg = generate(_spec(num_nodes=20000, num_edges=200000)).degrees()
    assert deg.max() > 8 * deg.mean()
    assert np.median(deg) < deg.mean()


def test_tiny_and_dense_specs_still_get_exact_edge_counts() -> None:
    for n, m, c in [(2, 1, 2), (10, 45, 3), (100, 300, 47)]:
        g = generate(SyntheticDataset(num_nodes=n, num_edges=m, num_classes=c))
        assert g.num_undirected_edges == m
        g.validate(deep=True)
    with pytest.raises(ValidationError, match="numEdges exceeds what numNodes can hold"):
        SyntheticDataset(num_nodes=10, num_edges=46)
    # The generator keeps its own guard for specs built without validation.
    with pytest.raises(DatasetError, match="numEdges=46 exceeds the 45 edges"):
        generate(SyntheticDataset.model_construct(num_nodes=10, num_edges=46))


def _propagate(g: GraphData, h: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Mean over each node's neighbours."""
    sums = np.zeros_like(h)
    np.add.at(sums, np.repeat(np.arange(g.num_nodes), g.degrees()), h[g.indices])
    return sums / np.maximum(g.degrees(), 1)[:, None]


def _ridge_accuracy(g: GraphData, h: npt.NDArray[np.float64]) -> float:
    """Test accuracy of a one-vs-all ridge classifier fitted on the training nodes."""
    h = np.hstack([h, np.ones((len(h), 1))])
    target = np.eye(g.num_classes)[g.y]
    a = h[g.train_mask]
    w = np.linalg.solve(a.T @ a + 1e-2 * np.eye(a.shape[1]), a.T @ target[g.train_mask])
    return float(np.mean((h[g.test_mask] @ w).argmax(axis=1) == g.y[g.test_mask]))


def test_neighbourhood_makes_labels_learnable() -> None:
    # A linear 2-hop GNN (SGC/SIGN style) against the features alone: the graph carries
    # most of the signal, as it does in ogbn-products.
    # an easy graph: the defaults are calibrated to be as hard as ogbn-products at its
    # density (benchmarks/accuracy/)
    g = generate(
        _spec(
            num_nodes=5000,
            num_edges=50000,
            num_classes=20,
            train_fraction=0.3,
            homophily=0.8,
            feature_noise=1.0,
        )
    )
    x = g.x.astype(np.float64)
    ax = _propagate(g, x)
    features_only = _ridge_accuracy(g, x)
    two_hop = _ridge_accuracy(g, np.hstack([x, ax, _propagate(g, ax)]))
    assert features_only < 0.75, features_only
    assert two_hop >= 0.9, two_hop


def test_graphsage_learns_the_synthetic_graph() -> None:
    torch = pytest.importorskip("torch")
    g = generate(
        _spec(
            num_nodes=1500, num_edges=15000, num_classes=6, seed=1, homophily=0.8, feature_noise=1.0
        )
    )
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    rows = torch.from_numpy(np.repeat(np.arange(g.num_nodes), g.degrees()))
    cols = torch.from_numpy(g.indices.astype(np.int64))
    inv_deg = torch.from_numpy(1.0 / np.maximum(g.degrees(), 1)).float().unsqueeze(1)
    x, y = torch.from_numpy(g.x), torch.from_numpy(g.y)
    train, test = torch.from_numpy(g.train_mask), torch.from_numpy(g.test_mask)

    def mean(h: Any) -> Any:
        return torch.zeros_like(h).index_add_(0, rows, h[cols]) * inv_deg

    # Two GraphSAGE (mean) layers: W_self h + W_neigh mean(h).
    layers = [torch.nn.Linear(16, 32), torch.nn.Linear(16, 32, bias=False)]
    layers += [torch.nn.Linear(32, 6), torch.nn.Linear(32, 6, bias=False)]
    opt = torch.optim.Adam([p for layer in layers for p in layer.parameters()], lr=0.02)

    def forward() -> Any:
        h = torch.relu(layers[0](x) + layers[1](mean(x)))
        return layers[2](h) + layers[3](mean(h))

    try:
        for _ in range(30):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward()[train], y[train]).backward()
            opt.step()
        with torch.no_grad():
            accuracy = (forward().argmax(1)[test] == y[test]).float().mean().item()
    finally:
        torch.set_num_threads(threads)
    assert accuracy >= 0.85, accuracy


def test_peak_memory_stays_near_the_final_size() -> None:
    # Products-like proportions (100 features, ~10 edges per node), scaled down.
    spec = SyntheticDataset(num_nodes=100_000, num_edges=1_000_000, num_features=100)
    tracemalloc.start()
    try:
        g = generate(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    final = g.indptr.nbytes + g.indices.nbytes + g.x.nbytes
    assert peak <= 2 * final, (peak, final)
