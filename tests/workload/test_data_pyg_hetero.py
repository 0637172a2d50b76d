"""The PyG HeteroData file loader, on real HeteroData objects saved with torch.save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_workload.data import DatasetError
from distgnn_workload.data.pyg_hetero import load_pyg_hetero, to_pyg_hetero

torch = pytest.importorskip("torch")
pyg_data = pytest.importorskip("torch_geometric.data")
transforms = pytest.importorskip("torch_geometric.transforms")


def _hetero(seed: int = 0) -> Any:
    gen = torch.Generator().manual_seed(seed)
    data = pyg_data.HeteroData()
    data["paper"].x = torch.randn(10, 4, generator=gen)
    data["paper"].y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, -1, 0])
    data["paper"].train_mask = torch.tensor([True] * 5 + [False] * 5)
    data["paper"].valid_mask = torch.tensor([5, 6])  # an index vector, OGB's spelling
    data["paper"].test_mask = torch.tensor([7, 9])
    data["author"].num_nodes = 6
    data["field_of_study"].num_nodes = 3
    data["author", "writes", "paper"].edge_index = torch.stack(
        [torch.randint(0, 6, (20,), generator=gen), torch.randint(0, 10, (20,), generator=gen)]
    )
    data["paper", "cites", "paper"].edge_index = torch.randint(0, 10, (2, 15), generator=gen)
    data["paper", "has_topic", "field_of_study"].edge_index = torch.stack(
        [torch.randint(0, 10, (8,), generator=gen), torch.randint(0, 3, (8,), generator=gen)]
    )
    return data


def _save(tmp_path: Path, data: Any, name: str = "graph.pt") -> Path:
    path = tmp_path / name
    torch.save(data, path)
    return path


def _pairs(ei: npt.NDArray[Any] | Any) -> set[tuple[int, int]]:
    arr = np.asarray(ei)
    return set(zip(arr[0].tolist(), arr[1].tolist(), strict=True))


@pytest.mark.parametrize("undirected_before_save", [False, True])
def test_loads_like_to_undirected(tmp_path: Path, undirected_before_save: bool) -> None:
    data = _hetero()
    reference = transforms.ToUndirected()(_hetero())
    saved = reference if undirected_before_save else data
    g = load_pyg_hetero(_save(tmp_path, saved))
    g.validate(deep=True)
    assert g.node_counts == {"paper": 10, "author": 6, "field_of_study": 3}
    assert g.edge_types == list(reference.edge_types)
    for et in reference.edge_types:
        assert _pairs(g.edge_index(et)) == _pairs(reference[et].edge_index), et
    assert np.array_equal(g.x["paper"], data["paper"].x.numpy())
    assert g.featureless_types == ["author", "field_of_study"]
    assert g.target_node_type == "paper"
    assert g.y.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, -1, 0]
    assert g.num_classes == 4
    assert np.flatnonzero(g.val_mask).tolist() == [5, 6]
    assert np.flatnonzero(g.test_mask).tolist() == [7, 9]


def test_round_trip_through_to_pyg_hetero(tmp_path: Path) -> None:
    g = load_pyg_hetero(_save(tmp_path, _hetero(1)))
    data = to_pyg_hetero(g)
    assert data.num_classes == 4
    assert data["author"].num_nodes == 6
    again = load_pyg_hetero(_save(tmp_path, data, "again.pt"))
    assert again.edge_types == g.edge_types
    for et in g.edge_types:
        assert np.array_equal(again.in_csr[et][0], g.in_csr[et][0])
        assert np.array_equal(again.in_csr[et][1], g.in_csr[et][1])
    assert np.array_equal(again.train_mask, g.train_mask)
    assert again.info["reverse_edge_types_added"] == []


def test_num_classes_is_read(tmp_path: Path) -> None:
    data = _hetero()
    data.num_classes = 349
    assert load_pyg_hetero(_save(tmp_path, data)).num_classes == 349


def _broken(tmp_path: Path, change: Any) -> Path:
    data = _hetero()
    change(data)
    return _save(tmp_path, data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["author", "writes", "paper"].__setitem__(
                "edge_index", torch.tensor([[0, 6], [1, 1]])
            ),
            r"author__writes__paper: edge 1 has source id 6 outside \[0, 6\)",
        ),
        (
            lambda d: d["author", "writes", "paper"].__setitem__(
                "edge_index", torch.tensor([0.0, 1.0])
            ),
            r"data\[author__writes__paper\].edge_index must be an integer tensor \[2, E\]",
        ),
        (lambda d: d["paper"].__delitem__("test_mask"), r"data\['paper'\] lacks test_mask"),
        (
            lambda d: d["paper"].__setitem__("train_mask", torch.tensor([8])),
            r"train_mask selects node 8, whose label is negative",
        ),
        (
            lambda d: d["paper"].__setitem__("y", torch.zeros(9, dtype=torch.long)),
            r"data\['paper'\].y must be an integer tensor \[10\]",
        ),
        (
            lambda d: d["author"].__setitem__("y", torch.zeros(6, dtype=torch.long)),
            r"2 node types have labels \(paper, author\); name the target node type in "
            r"spec.dataset.hetero.targetNodeType",
        ),
        (
            lambda d: d["paper"].__setitem__("num_nodes", 11),
            r"data\['paper'\].x has 10 rows but num_nodes is 11",
        ),
        (
            lambda d: d["venue", "hosts", "paper"].__setitem__(
                "edge_index", torch.tensor([[0], [0]])
            ),
            r"node type 'venue' has neither num_nodes nor x",
        ),
    ],
)
def test_bad_files_name_the_field(tmp_path: Path, change: Any, message: str) -> None:
    path = _broken(tmp_path, change)
    with pytest.raises(DatasetError, match=message):
        load_pyg_hetero(path)


def test_not_hetero_and_missing_file(tmp_path: Path) -> None:
    data = pyg_data.Data(x=torch.zeros(2, 2), edge_index=torch.tensor([[0], [1]]))
    with pytest.raises(DatasetError, match=r"holds a Data, not a torch_geometric.data.HeteroData"):
        load_pyg_hetero(_save(tmp_path, data))
    with pytest.raises(DatasetError, match=r"missing.pt: not found"):
        load_pyg_hetero(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(DatasetError, match=r"junk.pt: cannot be loaded with torch.load"):
        load_pyg_hetero(tmp_path / "junk.pt")


def test_target_type_choice(tmp_path: Path) -> None:
    path = _save(tmp_path, _hetero())
    with pytest.raises(
        DatasetError,
        match=r"target node type 'author' \(spec.dataset.hetero.targetNodeType\) has no labels",
    ):
        load_pyg_hetero(path, target_node_type="author")
    assert load_pyg_hetero(path, target_node_type="paper").target_node_type == "paper"
