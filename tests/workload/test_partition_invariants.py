"""Partition store invariants on several small graphs, for METIS and random partitioning."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_api.contract import SUCCESS_MARKER
from distgnn_api.spec import PartitionAlgorithm, PartitionSpec, SyntheticDataset
from distgnn_workload.data import DatasetError, GraphData
from distgnn_workload.data.csr import edge_pairs
from distgnn_workload.data.graph import NODE_TYPE
from distgnn_workload.data.synthetic import generate
from distgnn_workload.partition import PartitionStore, StoreError, algorithms, write_partitions
from distgnn_workload.partition.algorithms import random_assignment
from distgnn_workload.partition.metis import edge_cut, metis_input


def metis_assignment(g: GraphData, k: int, **kwargs: Any) -> npt.NDArray[np.int32]:
    """METIS on a homogeneous graph: the one-type case, the graph its own view."""
    return algorithms.metis_assignment(g.typed(), k, view=g, **kwargs)[NODE_TYPE]


def _graph(src: np.ndarray, dst: np.ndarray, n: int, f: int, seed: int) -> GraphData:
    rng = np.random.default_rng(seed)
    split = rng.integers(0, 3, n)
    return GraphData.from_edges(
        src,
        dst,
        x=rng.standard_normal((n, f)).astype(np.float32),
        y=rng.integers(0, 5, n),
        train_mask=split == 0,
        val_mask=split == 1,
        test_mask=split == 2,
        num_classes=5,
    )


def random_graph() -> GraphData:
    rng = np.random.default_rng(1)
    return _graph(rng.integers(0, 300, 1500), rng.integers(0, 300, 1500), 300, 6, 1)


def path_with_isolated_nodes() -> GraphData:
    # 60 nodes: a path over the first 50, ten isolated nodes at the end.
    src = np.arange(49)
    return _graph(src, src + 1, 60, 3, 2)


def star_graph() -> GraphData:
    n = 80
    return _graph(np.zeros(n - 1, dtype=np.int64), np.arange(1, n), n, 2, 3)


def community_graph() -> GraphData:
    return generate(
        SyntheticDataset(num_nodes=2000, num_edges=16000, num_features=8, num_classes=6, seed=4)
    )


GRAPHS: dict[str, Callable[[], GraphData]] = {
    "random": random_graph,
    "path+isolated": path_with_isolated_nodes,
    "star": star_graph,
    "community": community_graph,
}


def _edge_keys(src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
    return np.sort(src.astype(np.int64) * n + dst.astype(np.int64))


@pytest.mark.parametrize("graph_name", list(GRAPHS))
@pytest.mark.parametrize("algorithm", [PartitionAlgorithm.metis, PartitionAlgorithm.random])
@pytest.mark.parametrize("k", [1, 3, 4])
def test_store_round_trips_the_graph(
    tmp_path: Path, graph_name: str, algorithm: PartitionAlgorithm, k: int
) -> None:
    g = GRAPHS[graph_name]()
    n = g.num_nodes
    store = write_partitions(tmp_path / "store", g, k, spec=PartitionSpec(algorithm=algorithm))
    meta = store.meta
    assert (meta.num_nodes, meta.num_edges, meta.num_partitions) == (n, g.num_edges, k)
    assert (meta.num_features, meta.num_classes) == (g.num_features, g.num_classes)

    # Every node in exactly one partition: contiguous ranges covering [0, N), and the
    # original ids of the partitions form a permutation of the dataset's ids.
    offsets = np.asarray(meta.offsets)
    assert offsets[0] == 0
    assert offsets[-1] == n
    assert np.all(np.diff(offsets) >= 1)
    parts = [store.partition(p) for p in range(k)]
    orig = np.concatenate([np.asarray(q.orig_ids) for q in parts])
    assert np.array_equal(np.sort(orig), np.arange(n))
    assert np.array_equal(orig, np.asarray(store.orig_ids()))
    assert np.array_equal(np.asarray(store.new_ids())[orig], np.arange(n))
    book = np.asarray(store.partition_book())
    assert np.array_equal(book[orig], store.partition_of(np.arange(n)))
    for q in parts:
        assert np.all(store.partition_of(np.arange(q.start, q.end)) == q.id)

    # The union of the partitions' edges, mapped back to original ids, is the graph.
    original = edge_pairs(g.indptr, g.indices)
    want = _edge_keys(original[:, 0], original[:, 1], n)
    got_src, got_dst = [], []
    for q in parts:
        local = edge_pairs(np.asarray(q.indptr), np.asarray(q.indices))
        got_src.append(orig[local[:, 0] + q.start])
        got_dst.append(orig[local[:, 1]])
    assert np.array_equal(_edge_keys(np.concatenate(got_src), np.concatenate(got_dst), n), want)

    # The full topology is the partitions' CSRs stacked; rows stay sorted.
    indptr, indices = store.topology()
    assert indptr.dtype == np.int64
    assert indices.dtype == np.int32
    assert np.array_equal(indices, np.concatenate([np.asarray(q.indices) for q in parts]))
    for q in parts:
        assert np.array_equal(np.asarray(q.indptr), indptr[q.start : q.end + 1] - indptr[q.start])
    topo = edge_pairs(np.asarray(indptr), np.asarray(indices))
    keys = topo[:, 0] * n + topo[:, 1]
    assert np.all(np.diff(keys) > 0)

    # Features, labels and splits round-trip exactly through the original ids.
    for q in parts:
        ids = np.asarray(q.orig_ids)
        assert q.features.dtype == np.float32
        assert np.array_equal(q.features, g.x[ids])
        assert q.labels.dtype == np.int64
        assert np.array_equal(q.labels, g.y[ids])
        assert np.array_equal(q.train_mask, g.train_mask[ids])
        assert np.array_equal(q.val_mask, g.val_mask[ids])
        assert np.array_equal(q.test_mask, g.test_mask[ids])

    # META.json's edge cut and per-partition figures match a recount.
    assert meta.edge_cut == edge_cut(g, book)
    assert sum(s.num_nodes for s in meta.partitions) == n
    assert sum(s.num_train for s in meta.partitions) == int(g.train_mask.sum())
    assert sum(s.num_edges for s in meta.partitions) == g.num_edges


@pytest.mark.parametrize("k", [2, 4])
def test_metis_balances_nodes_and_train_nodes_within_5_percent(k: int) -> None:
    g = generate(SyntheticDataset(num_nodes=4000, num_edges=40000, num_classes=10, seed=5))
    parts = metis_assignment(g, k)
    nodes = np.bincount(parts, minlength=k)
    train = np.bincount(parts, weights=g.train_mask, minlength=k)
    assert nodes.max() / nodes.mean() <= 1.05, nodes
    assert train.max() / train.mean() <= 1.05, train


def test_metis_cuts_at_least_3x_fewer_edges_than_random_on_a_community_graph() -> None:
    g = generate(
        SyntheticDataset(num_nodes=5000, num_edges=50000, num_classes=10, homophily=0.9, seed=6)
    )
    metis_cut = edge_cut(g, metis_assignment(g, 4))
    random_cut = edge_cut(g, random_assignment(g.num_nodes, 4))
    assert random_cut >= 3 * metis_cut, (metis_cut, random_cut)


def test_more_partitions_than_nodes_is_bad_input(tmp_path: Path) -> None:
    g = star_graph()
    with pytest.raises(DatasetError, match="numPartitions=81 exceeds the graph's 80 nodes"):
        write_partitions(tmp_path / "s", g, 81)
    assert not (tmp_path / "s").exists()


def test_existing_store_is_kept_unless_overwritten(tmp_path: Path) -> None:
    g = random_graph()
    first = write_partitions(
        tmp_path / "s", g, 2, spec=PartitionSpec(algorithm=PartitionAlgorithm.random)
    )
    with pytest.raises(FileExistsError):
        write_partitions(tmp_path / "s", g, 3)
    assert PartitionStore.open(tmp_path / "s").meta.num_partitions == 2
    second = write_partitions(tmp_path / "s", g, 3, overwrite=True)
    assert second.meta.num_partitions == 3
    assert first.path == second.path
    assert [p.name for p in tmp_path.iterdir()] == ["s"]  # no temporary leftovers


def test_reader_refuses_incomplete_or_foreign_stores(tmp_path: Path) -> None:
    write_partitions(tmp_path / "s", random_graph(), 2)
    meta_path = tmp_path / "s" / "META.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 999
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="format_version 999"):
        PartitionStore.open(tmp_path / "s")
    (tmp_path / "s" / SUCCESS_MARKER).unlink()
    with pytest.raises(StoreError, match="incomplete"):
        PartitionStore.open(tmp_path / "s")
    with pytest.raises(StoreError, match="no partition store"):
        PartitionStore.open(tmp_path / "missing")


def test_given_assignment_is_used_as_is(tmp_path: Path) -> None:
    g = random_graph()
    assignment = np.arange(g.num_nodes) % 3
    store = write_partitions(tmp_path / "s", g, assignment=assignment)
    assert store.meta.algorithm == "given"
    assert np.array_equal(np.asarray(store.partition_book()), assignment)
    # New ids keep the original order within each partition.
    assert np.array_equal(np.asarray(store.partition(1).orig_ids), np.arange(1, g.num_nodes, 3))


def test_metis_input_subgraph_is_symmetric_and_about_the_asked_size() -> None:
    g = community_graph()
    xadj, adjncy, kept = metis_input(g, g.num_edges // 2, seed=3)
    assert 0.45 < kept < 0.55
    pairs = edge_pairs(xadj, adjncy)
    keys = pairs[:, 0] * g.num_nodes + pairs[:, 1]
    reverse = np.sort(pairs[:, 1] * g.num_nodes + pairs[:, 0])
    assert np.array_equal(np.sort(keys), reverse)  # both directions of each kept edge
    full = edge_pairs(g.indptr, g.indices)
    assert np.isin(keys, full[:, 0] * g.num_nodes + full[:, 1]).all()  # a subgraph


def test_metis_on_a_sampled_subgraph_stays_balanced_with_a_similar_cut() -> None:
    g = generate(
        SyntheticDataset(num_nodes=5000, num_edges=50000, num_classes=10, homophily=0.9, seed=6)
    )
    full_cut = edge_cut(g, metis_assignment(g, 4))
    parts = metis_assignment(g, 4, max_metis_edges=g.num_edges // 2)
    nodes = np.bincount(parts, minlength=4)
    train = np.bincount(parts, weights=g.train_mask, minlength=4)
    assert nodes.max() / nodes.mean() <= 1.05
    assert train.max() / train.mean() <= 1.05
    assert edge_cut(g, parts) <= 1.3 * full_cut


def test_truncated_array_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    store = write_partitions(tmp_path / "s", random_graph(), 2)
    features = tmp_path / "s" / "part-1" / "features.npy"
    assert features.exists()
    features.write_bytes(features.read_bytes()[:200])
    with pytest.raises(StoreError) as info:
        _ = store.partition(1).features
    assert "part-1/features.npy" in str(info.value)
    assert "truncated" in str(info.value)


@pytest.mark.parametrize("algorithm", ["metis", "random"])
def test_a_homogeneous_graph_is_assigned_as_its_one_type_typed_graph(algorithm: str) -> None:
    g = generate(SyntheticDataset(num_nodes=3000, num_edges=30000, num_classes=5, seed=8))
    spec = PartitionSpec(algorithm=PartitionAlgorithm(algorithm), seed=2)
    direct = algorithms.assign(g, 3, spec)
    # the typed path builds the homogeneous view itself: the same graph, so the same parts
    typed = algorithms.assign(g.typed(), 3, spec)
    assert list(typed) == [NODE_TYPE]
    assert direct.dtype == np.int32
    assert np.array_equal(direct, typed[NODE_TYPE])


def test_a_homogeneous_store_reads_as_the_one_type_case_of_a_typed_store(
    tmp_path: Path,
) -> None:
    from distgnn_workload.data.graph import EDGE_TYPE
    from distgnn_workload.runtime.training_data import from_store

    g = generate(SyntheticDataset(num_nodes=600, num_edges=4000, num_classes=4, seed=9))
    store = write_partitions(
        tmp_path / "s", g, 3, spec=PartitionSpec(algorithm=PartitionAlgorithm.random)
    )
    view = store.typed()
    assert view.meta.node_types == [NODE_TYPE]
    assert view.meta.edge_type_tuples == [EDGE_TYPE]
    assert view.meta.edge_cut == 2 * store.meta.edge_cut  # typed: each direction counts
    assert [s.num_nodes[NODE_TYPE] for s in view.meta.partitions] == [
        s.num_nodes for s in store.meta.partitions
    ]
    part = view.partition(1)
    assert isinstance(part.x[NODE_TYPE], np.memmap)  # the store's own file, not a copy
    assert np.array_equal(part.nodes[NODE_TYPE], np.arange(store.offsets[1], store.offsets[2]))
    ids = np.arange(store.meta.num_nodes)
    assert np.array_equal(view.owner(NODE_TYPE), store.partition_of(ids))
    # the whole graph read typed is the store's graph typed (both in new ids)
    back, want = view.to_graph(), store.to_graph().typed()
    back.validate(deep=True)
    for got, expected in zip(back.in_csr[EDGE_TYPE], want.in_csr[EDGE_TYPE], strict=True):
        assert np.array_equal(got, expected)
    assert np.array_equal(back.x[NODE_TYPE], want.x[NODE_TYPE])
    assert np.array_equal(back.y, want.y)
    assert np.array_equal(back.train_mask, want.train_mask)
    # the typed runtime's loader reads it as it reads a typed store
    data = from_store(view)
    assert data.node_counts == {NODE_TYPE: g.num_nodes}
    assert sum(len(t) for t in data.train_ids) == int(g.train_mask.sum())
    assert np.array_equal(data.book[NODE_TYPE].numpy(), store.partition_of(ids))
