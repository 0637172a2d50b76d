"""Invariants of typed partitioning and the typed store: ownership, per-type balance, a
round-trip equal to the in-memory graph, the reader's contract, ``_SUCCESS`` and reuse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distgnn_api.contract import SUCCESS_MARKER
from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.partition import (
    HeteroPartitionStore,
    StoreError,
    is_hetero_store,
    load_hetero_partition,
    write_partitions,
)
from distgnn_workload.partition.algorithms import (
    TOLERANCE,
    assign,
    homogeneous_view,
    type_offsets,
)

WRITES: EdgeType = ("author", "writes", "paper")


@pytest.fixture(scope="module")
def mag() -> HeteroGraphData:
    return generate_mag(SyntheticHeteroConfig(scale=0.004, num_features=6, num_classes=9))


def _spec(algorithm: str) -> PartitionSpec:
    return PartitionSpec(algorithm=PartitionAlgorithm(algorithm))


def test_homogeneous_view_stacks_types_and_merges_every_edge_type(mag: HeteroGraphData) -> None:
    view = homogeneous_view(mag)
    offsets = type_offsets(mag)
    assert view.num_nodes == sum(mag.node_counts.values())
    view.validate(deep=True)  # symmetric, sorted, no self-loops, no duplicates
    # Its edges are exactly the typed edges at their types' offsets, both ways, no loops.
    n = view.num_nodes
    expected = []
    for (s, _, d), (indptr, indices) in mag.in_csr.items():
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)) + offsets[d]
        src = indices.astype(np.int64) + offsets[s]
        expected += [dst * n + src, src * n + dst]
    keys = np.unique(np.concatenate(expected))
    keys = keys[keys // n != keys % n]
    rows = np.repeat(np.arange(n), view.degrees())
    assert np.array_equal(rows * n + view.indices, keys)
    train = np.flatnonzero(view.train_mask)
    t0 = offsets[mag.target_node_type]
    assert np.array_equal(train - t0, np.flatnonzero(mag.train_mask))


@pytest.mark.parametrize("algorithm", ["metis", "random"])
@pytest.mark.parametrize("k", [2, 3])
def test_every_typed_node_has_one_owner_and_each_type_is_balanced(
    mag: HeteroGraphData, algorithm: str, k: int
) -> None:
    owner = assign(mag, k, _spec(algorithm))
    assert set(owner) == set(mag.node_types)
    for t, n in mag.node_counts.items():
        assert owner[t].shape == (n,)
        assert owner[t].dtype == np.int32
        assert owner[t].min() >= 0
        assert owner[t].max() < k
        counts = np.bincount(owner[t], minlength=k)
        limit = max(n / k * (1 + TOLERANCE["nodes"]), np.floor(n / k) + 1)
        assert counts.max() <= limit, (t, counts)
    train = np.bincount(owner[mag.target_node_type][mag.train_mask], minlength=k)
    n_train = int(mag.train_mask.sum())
    assert train.max() <= max(n_train / k * (1 + TOLERANCE["train_nodes"]), n_train // k + 1)


def test_metis_cuts_fewer_edges_than_random(tmp_path: Path, mag: HeteroGraphData) -> None:
    cut = {
        a: write_partitions(tmp_path / a, mag, 2, spec=_spec(a)).meta.edge_cut
        for a in ("metis", "random")
    }
    assert 0 < cut["metis"] < cut["random"]


def test_store_round_trip_equals_the_in_memory_graph(tmp_path: Path, mag: HeteroGraphData) -> None:
    store = write_partitions(tmp_path / "s", mag, 3, spec=_spec("metis"), key="abc")
    back = store.to_graph()
    assert back.node_counts == mag.node_counts
    assert back.edge_types == mag.edge_types
    for et, (indptr, indices) in mag.in_csr.items():
        assert np.array_equal(back.in_csr[et][0], indptr)
        assert np.array_equal(back.in_csr[et][1], indices)
        assert back.in_csr[et][1].dtype == indices.dtype
    assert set(back.x) == set(mag.x)
    for t, x in mag.x.items():
        assert np.array_equal(back.x[t], x)
    for name in ("y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(back, name), getattr(mag, name))
    assert back.num_classes == mag.num_classes
    assert back.target_node_type == mag.target_node_type
    back.validate(deep=True)

    m = store.meta
    assert m.key == "abc"
    assert m.num_partitions == 3
    assert m.type_offsets == type_offsets(mag)
    assert [s.num_nodes for s in m.partitions] == [
        {t: int((np.asarray(store.owner(t)) == p).sum()) for t in mag.node_types} for p in range(3)
    ]
    total_in = sum(sum(s.num_in_edges.values()) for s in m.partitions)
    assert total_in == mag.num_edges()
    assert sum(s.num_cut_edges for s in m.partitions) == m.edge_cut
    assert m.edge_cut == sum(m.edge_cut_by_type.values())


def test_the_reader_contract(tmp_path: Path, mag: HeteroGraphData) -> None:
    write_partitions(tmp_path / "s", mag, 2, spec=_spec("random"), key="k")
    seen = {t: np.zeros(n, dtype=np.int64) for t, n in mag.node_counts.items()}
    for p in range(2):
        part = load_hetero_partition(tmp_path / "s", p)
        assert part.id == p
        assert part.node_types == mag.node_types
        assert part.edge_types == mag.edge_types
        assert part.node_counts == mag.node_counts
        assert part.target_node_type == "paper"
        assert part.num_classes == mag.num_classes
        for t in mag.node_types:
            ids = np.asarray(part.nodes[t])
            assert np.all(np.diff(ids) > 0)  # ascending, distinct
            assert np.all(np.asarray(part.owner[t])[ids] == p)
            assert len(part.owner[t]) == mag.node_counts[t]
            seen[t][ids] += 1
        assert set(part.x) == {"paper"}
        papers = np.asarray(part.nodes["paper"])
        assert np.array_equal(part.x["paper"], mag.x["paper"][papers])
        assert np.array_equal(part.y, mag.y[papers])
        assert np.array_equal(part.train_mask, mag.train_mask[papers])
        train = part.split_ids("train")
        assert np.array_equal(train, papers[mag.train_mask[papers]])
        # local_in_csr: the owned destinations' rows of the whole graph's in-CSR.
        ptr, idx = part.local_in_csr(WRITES)
        full_ptr, full_idx = mag.in_csr[WRITES]
        assert len(ptr) == len(papers) + 1
        for i in (0, len(papers) // 2, len(papers) - 1):
            d = papers[i]
            assert np.array_equal(idx[ptr[i] : ptr[i + 1]], full_idx[full_ptr[d] : full_ptr[d + 1]])
    for t, count in seen.items():
        assert np.all(count == 1), t  # every typed node owned by exactly one partition


def test_success_marker_is_last_and_required(tmp_path: Path, mag: HeteroGraphData) -> None:
    out = tmp_path / "s"
    write_partitions(out, mag, 2, spec=_spec("random"), key="k")
    assert is_hetero_store(out)
    marker = json.loads((out / SUCCESS_MARKER).read_text())
    assert marker["key"] == "k"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".s.tmp-")]
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_partitions(out, mag, 2)
    (out / SUCCESS_MARKER).unlink()
    assert not is_hetero_store(out)
    with pytest.raises(StoreError, match="incomplete"):
        HeteroPartitionStore.open(out)
    with pytest.raises(StoreError, match="not run"):
        load_hetero_partition(tmp_path / "absent", 0)


def test_an_incomplete_leftover_is_replaced(tmp_path: Path, mag: HeteroGraphData) -> None:
    out = tmp_path / "s"
    out.mkdir()
    (out / "junk").write_text("from a crashed writer")
    store = write_partitions(out, mag, 2, spec=_spec("random"))
    assert not (out / "junk").exists()
    assert store.meta.num_partitions == 2


def test_same_key_same_bytes(tmp_path: Path, mag: HeteroGraphData) -> None:
    """The content key names the bytes: the same spec on the same graph writes the same store."""
    a = write_partitions(tmp_path / "a", mag, 2, spec=_spec("metis"), key="k")
    b = write_partitions(tmp_path / "b", mag, 2, spec=_spec("metis"), key="k")
    for t in mag.node_types:
        assert np.array_equal(a.owner(t), b.owner(t))
    assert a.meta.edge_cut == b.meta.edge_cut


def test_stores_of_the_other_kind_are_refused(tmp_path: Path, mag: HeteroGraphData) -> None:
    from distgnn_workload.data.graph import GraphData

    g = GraphData.from_edges(
        [0, 1, 2],
        [1, 2, 3],
        np.zeros((4, 1)),
        [0, 1, 0, 1],
        [1, 1, 0, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
    )
    write_partitions(tmp_path / "homo", g, 2)
    with pytest.raises(StoreError, match="homogeneous"):
        HeteroPartitionStore.open(tmp_path / "homo")
    assert not is_hetero_store(tmp_path / "homo")


def test_a_bad_assignment_is_refused(tmp_path: Path, mag: HeteroGraphData) -> None:
    owner = {t: np.zeros(n, dtype=np.int32) for t, n in mag.node_counts.items()}
    owner["paper"][0] = 5
    with pytest.raises(ValueError, match=r"assignment\['paper'\] values must lie in \[0, 2\)"):
        write_partitions(tmp_path / "s", mag, 2, assignment=owner)
    del owner["author"]
    with pytest.raises(ValueError, match="node types"):
        write_partitions(tmp_path / "s", mag, 2, assignment=owner)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("bitmap", [True, False])
def test_halo_and_cut_figures_match_a_direct_count(
    tmp_path: Path, mag: HeteroGraphData, bitmap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distgnn_workload.partition import figures

    if not bitmap:  # the sorted-keys path that very large k * n takes
        monkeypatch.setattr(figures._HaloSet, "BITMAP_MAX", 0)
    store = write_partitions(tmp_path / "s", mag, 3, spec=_spec("random"))
    owner = {t: np.asarray(store.owner(t)) for t in mag.node_types}
    halo: dict[int, dict[str, set[int]]] = {p: {t: set() for t in mag.node_types} for p in range(3)}
    cut = [0, 0, 0]
    for (s, _, d), (indptr, indices) in mag.in_csr.items():
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        pd, ps = owner[d][dst], owner[s][indices]
        for p in range(3):
            remote = (pd == p) & (ps != p)
            cut[p] += int(remote.sum())
            halo[p][s].update(indices[remote].tolist())
    for st in store.meta.partitions:
        assert st.num_cut_edges == cut[st.id]
        assert st.num_halo_nodes == {t: len(halo[st.id][t]) for t in mag.node_types}


@pytest.mark.parametrize("algorithm", ["metis", "random"])
def test_a_type_with_fewer_nodes_than_partitions(tmp_path: Path, algorithm: str) -> None:
    rng = np.random.default_rng(1)
    graph = HeteroGraphData.from_edges(
        {"paper": 60, "venue": 2},
        {
            ("paper", "cites", "paper"): (rng.integers(0, 60, 150), rng.integers(0, 60, 150)),
            ("paper", "in", "venue"): (np.arange(60), np.arange(60) % 2),
        },
        {"paper": rng.random((60, 3))},
        "paper",
        np.arange(60) % 4,
        np.arange(60) < 40,
        (np.arange(60) >= 40) & (np.arange(60) < 50),
        np.arange(60) >= 50,
    )
    store = write_partitions(tmp_path / "s", graph, 3, spec=_spec(algorithm))
    venues = [store.meta.partitions[p].num_nodes["venue"] for p in range(3)]
    assert sorted(venues) == [0, 1, 1]
    empty = venues.index(0)
    assert len(store.partition(empty).nodes["venue"]) == 0
    back = store.to_graph()
    assert np.array_equal(back.x["paper"], graph.x["paper"])
    assert np.array_equal(back.y, graph.y)
