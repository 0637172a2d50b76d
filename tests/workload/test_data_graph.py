"""The typed graph and its builder: reverse relations as PyG's ToUndirected adds them; a
homogeneous graph as the one-type case."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data import DatasetError
from distgnn_workload.data.csr import typed_csr_from_edges
from distgnn_workload.data.graph import HeteroGraphData

COUNTS = {"paper": 6, "author": 4, "field_of_study": 3}
WRITES: EdgeType = ("author", "writes", "paper")
CITES: EdgeType = ("paper", "cites", "paper")
HAS_TOPIC: EdgeType = ("paper", "has_topic", "field_of_study")


def _edges(rng: np.random.Generator) -> dict[EdgeType, tuple[npt.NDArray[Any], npt.NDArray[Any]]]:
    def rand(et: EdgeType, m: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        return (
            rng.integers(0, COUNTS[et[0]], m),
            rng.integers(0, COUNTS[et[2]], m),
        )

    return {WRITES: rand(WRITES, 15), CITES: rand(CITES, 12), HAS_TOPIC: rand(HAS_TOPIC, 10)}


def _pairs(graph_csr: tuple[npt.NDArray[Any], npt.NDArray[Any]]) -> list[tuple[int, int]]:
    indptr, indices = graph_csr
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return sorted(zip(indices.tolist(), dst.tolist(), strict=True))


def _graph(**kw: Any) -> HeteroGraphData:
    rng = np.random.default_rng(0)
    y = np.array([0, 1, 2, -1, 1, 0])
    return HeteroGraphData.from_edges(
        COUNTS,
        _edges(rng),
        {"paper": rng.standard_normal((6, 4))},
        "paper",
        y,
        np.array([0, 1]),
        np.array([2]),
        np.array([4, 5]),
        **kw,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reverse_relations_match_pyg_to_undirected(seed: int) -> None:
    torch = pytest.importorskip("torch")
    pyg_data = pytest.importorskip("torch_geometric.data")
    transforms = pytest.importorskip("torch_geometric.transforms")
    edges = _edges(np.random.default_rng(seed))
    data = pyg_data.HeteroData()
    for t, n in COUNTS.items():
        data[t].num_nodes = n
    for et, (s, d) in edges.items():
        data[et].edge_index = torch.tensor(np.stack([s, d]), dtype=torch.long)
    data = transforms.ToUndirected()(data)

    in_csr, info = typed_csr_from_edges(edges, COUNTS)
    assert list(in_csr) == list(data.edge_types)  # same types, same order
    for et in data.edge_types:
        expected = sorted({tuple(p) for p in data[et].edge_index.t().tolist()})
        assert _pairs(in_csr[et]) == expected, et
    assert info["reverse_edge_types_added"] == [
        "paper__rev_writes__author",
        "field_of_study__rev_has_topic__paper",
    ]


def test_rows_sorted_unique_narrow_dtype_and_counts() -> None:
    edges: dict[EdgeType, tuple[Any, Any]] = {
        WRITES: ([0, 0, 1, 3, 0], [2, 2, 2, 5, 1]),  # one duplicate
        CITES: ([0, 1, 2, 2, 3], [1, 0, 2, 3, 4]),  # 0-1 twice (reverse), one self-loop
    }
    in_csr, info = typed_csr_from_edges(edges, COUNTS)
    indptr, indices = in_csr[WRITES]
    assert indptr.dtype == np.int64
    assert indices.dtype == np.int32
    assert indptr.tolist() == [0, 0, 1, 3, 3, 3, 4]
    assert indices.tolist() == [0, 0, 1, 3]
    assert _pairs(in_csr[("paper", "rev_writes", "author")]) == [(1, 0), (2, 0), (2, 1), (5, 3)]
    assert _pairs(in_csr[CITES]) == [(0, 1), (1, 0), (2, 2), (2, 3), (3, 2), (3, 4), (4, 3)]
    assert info["duplicate_edges_dropped"] == {"author__writes__paper": 1, "paper__cites__paper": 1}
    assert info["self_loops"] == {"paper__cites__paper": 1}


def test_given_reverse_is_merged_not_doubled() -> None:
    rev: EdgeType = ("paper", "rev_writes", "author")
    edges: dict[EdgeType, tuple[Any, Any]] = {WRITES: ([0, 1], [2, 3]), rev: ([4, 2], [2, 0])}
    in_csr, info = typed_csr_from_edges(edges, COUNTS)
    assert list(in_csr) == [WRITES, rev]
    assert _pairs(in_csr[WRITES]) == [(0, 2), (1, 3), (2, 4)]
    assert _pairs(in_csr[rev]) == [(2, 0), (3, 1), (4, 2)]
    assert info["reverse_edge_types_added"] == []
    again, _ = typed_csr_from_edges({et: _as_lists(in_csr[et]) for et in in_csr}, COUNTS)
    for et in in_csr:
        assert _pairs(again[et]) == _pairs(in_csr[et])


def _as_lists(csr: tuple[npt.NDArray[Any], npt.NDArray[Any]]) -> tuple[list[int], list[int]]:
    pairs = _pairs(csr)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def test_without_reverse_keeps_relations_as_given() -> None:
    edges: dict[EdgeType, tuple[Any, Any]] = {WRITES: ([0], [2]), CITES: ([0], [1])}
    in_csr, _ = typed_csr_from_edges(edges, COUNTS, add_reverse=False)
    assert list(in_csr) == [WRITES, CITES]
    assert _pairs(in_csr[CITES]) == [(0, 1)]


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        (
            {WRITES: ([0, 4], [1, 1])},
            "author__writes__paper: edge 1 has source id 4 outside [0, 4)",
        ),
        ({WRITES: ([0], [-1])}, "author__writes__paper: edge 0 has destination id -1"),
        ({CITES: ([0, 1], [1])}, "paper__cites__paper has 2 source ids but 1 destination ids"),
        ({("paper", "cites", "venue"): ([0], [0])}, "names node type 'venue'"),
        ({("paper", "bad__rel", "paper"): ([0], [0])}, "is not a type name"),
        ({WRITES: ([0.5], [1])}, "node ids must be integers"),
    ],
)
def test_bad_edges_name_the_relation(edges: Any, message: str) -> None:
    with pytest.raises(DatasetError, match=re.escape(message)):
        typed_csr_from_edges(edges, COUNTS)


def test_graph_accessors_and_deep_validation() -> None:
    g = _graph()
    g.validate(deep=True)
    assert g.node_types == ["paper", "author", "field_of_study"]
    assert g.featureless_types == ["author", "field_of_study"]
    assert g.num_features("paper") == 4
    assert g.num_features("author") == 0
    assert g.num_classes == 3
    assert g.train_mask.tolist() == [True, True, False, False, False, False]
    assert g.num_edges() == sum(g.num_edges(et) for et in g.edge_types)
    ei = g.edge_index(WRITES)
    assert ei.shape == (2, g.num_edges(WRITES))
    assert sorted(zip(ei[0].tolist(), ei[1].tolist(), strict=True)) == _pairs(g.in_csr[WRITES])
    assert g.nbytes() > 0


def test_validation_rejects_unlabelled_training_nodes_and_broken_csr() -> None:
    g = _graph()
    g.train_mask[3] = True  # paper 3 has label -1
    with pytest.raises(DatasetError, match="train_mask selects paper node 3, which has no label"):
        g.validate()
    g = _graph()
    g.in_csr[WRITES] = (np.array([0, 0, 0, 2, 2, 2, 2]), np.array([3, 1], dtype=np.int32))
    g.validate()  # shapes and ranges hold
    with pytest.raises(DatasetError, match="author__writes__paper: rows must be sorted"):
        g.validate(deep=True)
    g = _graph()
    g.target_node_type = "venue"
    with pytest.raises(DatasetError, match="target node type 'venue'"):
        g.validate()
    with pytest.raises(DatasetError, match=r"a split lists node ids outside \[0, 1\)"):
        _graph().from_edges(COUNTS, {}, {}, "paper", [0], [3], [], [])
    with pytest.raises(DatasetError, match="features given for node type 'venue'"):
        _graph().from_edges(COUNTS, {}, {"venue": np.zeros((2, 2))}, "paper", [0], [], [], [])


def test_a_homogeneous_graph_is_the_one_type_case_sharing_its_arrays() -> None:
    from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE, GraphData

    g = GraphData.from_edges(
        [0, 1, 2], [1, 2, 0], np.ones((3, 2)), [0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]
    )
    typed = g.typed()
    typed.validate(deep=True)
    assert typed.node_counts == {NODE_TYPE: 3}
    assert typed.edge_types == [EDGE_TYPE]
    indptr, indices = typed.in_csr[EDGE_TYPE]
    assert indptr is g.indptr
    assert indices is g.indices
    assert typed.x[NODE_TYPE] is g.x
    assert typed.num_edges() == g.num_edges
    assert typed.target_node_type == NODE_TYPE
    # symmetric: the typed builder makes the same in-CSR from the same edges
    again, _ = typed_csr_from_edges({EDGE_TYPE: ([0, 1, 2], [1, 2, 0])}, {NODE_TYPE: 3})
    assert np.array_equal(again[EDGE_TYPE][0], indptr)
    assert np.array_equal(again[EDGE_TYPE][1], indices)
