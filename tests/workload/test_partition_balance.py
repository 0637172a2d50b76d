"""The multi-constraint rebalancing pass that follows METIS."""

from __future__ import annotations

import numpy as np

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data import GraphData
from distgnn_workload.data.synthetic import generate
from distgnn_workload.partition.algorithms import balance_weights
from distgnn_workload.partition.balance import is_balanced, loads, rebalance
from distgnn_workload.partition.metis import edge_cut


def _graph() -> GraphData:
    return generate(SyntheticDataset(num_nodes=3000, num_edges=30000, num_classes=6, seed=2))


def test_restores_balance_from_a_skewed_start() -> None:
    g = _graph()
    weights, _ = balance_weights(g.typed(), g, balance_train_nodes=True, balance_edges=True)
    # Classes 0-2 in partition 0, the rest spread over 1-3: partition 0 is far too heavy.
    parts = np.where(g.y < 3, 0, 1 + g.y % 3).astype(np.int32)
    assert not is_balanced(parts, weights, 4, 0.03)
    out = rebalance(g.indptr, g.indices, parts.copy(), weights, 4, tolerance=0.03)
    assert is_balanced(out, weights, 4, 0.03)
    load = loads(out, weights, 4)
    assert np.all(load.max(axis=0) <= np.maximum(1.03 * load.mean(axis=0), load.mean(axis=0) + 1))


def test_leaves_a_balanced_partition_alone() -> None:
    g = _graph()
    weights, _ = balance_weights(g.typed(), g, balance_train_nodes=True, balance_edges=False)
    # Train and other nodes each dealt round-robin: balanced on both constraints.
    parts = np.empty(g.num_nodes, dtype=np.int32)
    for group in (g.train_mask, ~g.train_mask):
        parts[group] = np.arange(int(group.sum())) % 4
    assert is_balanced(parts, weights, 4, 0.03)
    out = rebalance(g.indptr, g.indices, parts.copy(), weights, 4)
    assert np.array_equal(out, parts)


def test_prefers_moves_that_cut_few_edges() -> None:
    # Two communities split 60/40: evening them out should cost far fewer cut edges than
    # the same number of random moves would.
    g = generate(
        SyntheticDataset(num_nodes=4000, num_edges=40000, num_classes=2, homophily=0.95, seed=3)
    )
    weights, _ = balance_weights(g.typed(), g, balance_train_nodes=False, balance_edges=False)
    parts = g.y.astype(np.int32).copy()
    before = edge_cut(g, parts)
    out = rebalance(g.indptr, g.indices, parts.copy(), weights, 2, tolerance=0.03)
    assert is_balanced(out, weights, 2, 0.03)
    moved = np.flatnonzero(out != parts)
    rng = np.random.default_rng(0)
    heavy = int(np.argmax(np.bincount(parts)))
    random_moves = parts.copy()
    random_moves[rng.choice(np.flatnonzero(parts == heavy), len(moved), replace=False)] = 1 - heavy
    assert edge_cut(g, out) - before < 0.5 * (edge_cut(g, random_moves) - before)
