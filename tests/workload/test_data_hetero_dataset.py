"""Loading a heterogeneous dataset by source kind, and checking the types a spec declares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data import DatasetError, load_hetero_dataset
from distgnn_workload.data.dataset import check_declared_types
from distgnn_workload.data.ogb_hetero_writer import write_ogb_hetero
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig

WRITES: EdgeType = ("author", "writes", "paper")
CITES: EdgeType = ("paper", "cites", "paper")
COUNTS = {"paper": 4, "author": 3}
EDGES = {WRITES: [[0, 0], [1, 1], [2, 3]], CITES: [[0, 1], [2, 3]]}


def _ogb(data_dir: Path) -> None:
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    y = np.array([0, 1, 0, 1])
    splits = {"train": [0, 1], "val": [2], "test": [3]}
    write_ogb_hetero(
        data_dir / "datasets" / "tiny", COUNTS, EDGES, {"paper": x}, "paper", y, splits
    )


def test_ogb_source_resolves_the_path_on_the_volume(tmp_path: Path) -> None:
    _ogb(tmp_path)
    shares: list[float] = []
    g = load_hetero_dataset("ogb", tmp_path, path="datasets/tiny", progress=shares.append)
    assert g.node_counts == {"author": 3, "paper": 4}
    assert g.edge_types == [WRITES, CITES, ("paper", "rev_writes", "author")]
    assert shares[-1] == 1.0
    plain = load_hetero_dataset("ogb", tmp_path, path="datasets/tiny", add_reverse=False)
    assert plain.edge_types == [WRITES, CITES]
    check_declared_types(g, ["paper", "author"], ["author__writes__paper", "paper__cites__paper"])


def test_pyg_source(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from distgnn_workload.data.pyg_hetero import to_pyg_hetero

    _ogb(tmp_path)
    g = load_hetero_dataset("ogb", tmp_path, path="datasets/tiny")
    torch.save(to_pyg_hetero(g), tmp_path / "graph.pt")
    again = load_hetero_dataset("pyg", tmp_path, path="graph.pt", target_node_type="paper")
    assert again.edge_types == g.edge_types
    assert np.array_equal(again.x["paper"], g.x["paper"])


def test_synthetic_source() -> None:
    cfg = SyntheticHeteroConfig(scale=0.002, seed=4)
    g = load_hetero_dataset("synthetic_mag", synthetic=cfg, target_node_type="paper")
    assert g.node_counts == cfg.node_counts()
    assert len(g.edge_types) == 7
    assert (
        len(load_hetero_dataset("synthetic_mag", synthetic=cfg, add_reverse=False).edge_types) == 4
    )
    with pytest.raises(DatasetError, match=r"spec.dataset.hetero: targetNodeType 'author'"):
        load_hetero_dataset("synthetic_mag", synthetic=cfg, target_node_type="author")


def test_bad_source_and_missing_path() -> None:
    with pytest.raises(DatasetError, match=r"unknown heterogeneous source 'csv'"):
        load_hetero_dataset("csv")
    with pytest.raises(DatasetError, match=r"spec.dataset.ogb.path: a ogb dataset needs the path"):
        load_hetero_dataset("ogb")


def test_declared_types_must_match_the_files(tmp_path: Path) -> None:
    _ogb(tmp_path)
    g = load_hetero_dataset("ogb", tmp_path, path="datasets/tiny")
    with pytest.raises(
        DatasetError,
        match=r"spec.dataset.hetero.nodeTypes: declares venue, which the dataset lacks; omits "
        r"author, which the dataset has: list the dataset's node types \(author, paper\)",
    ):
        check_declared_types(g, ["paper", "venue"])
    with pytest.raises(
        DatasetError,
        match=r"spec.dataset.hetero.edgeTypes: omits paper__cites__paper, which the dataset has",
    ):
        check_declared_types(g, None, ["author__writes__paper"])
