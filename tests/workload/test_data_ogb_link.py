"""The OGB link raw-format loader, on small files written in ogbl-citation2's and
ogbl-collab's exact layouts (raw/*.csv.gz, split/time/{train,valid,test}.pt holding dicts of
numpy arrays; nothing is downloaded), and its errors on bad input."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from distgnn_workload.data import DatasetError
from distgnn_workload.data.ogb_link import load_ogb_link, write_ogb_link

N = 12
RNG = np.random.default_rng(0)
EDGES = np.array([[i, (i + d) % N] for i in range(N) for d in (1, 3)], dtype=np.int64)
X = RNG.standard_normal((N, 5)).astype(np.float32)


def _citation2(root: Path) -> Path:
    """ogbl-citation2's split dicts: source_node/target_node, valid/test target_node_neg."""
    splits: dict[str, dict[str, Any]] = {
        "train": {"source_node": EDGES[4:, 0], "target_node": EDGES[4:, 1]},
        "valid": {
            "source_node": EDGES[:2, 0],
            "target_node": EDGES[:2, 1],
            "target_node_neg": np.arange(2 * 7).reshape(2, 7) % N,
        },
        "test": {
            "source_node": EDGES[2:4, 0],
            "target_node": EDGES[2:4, 1],
            "target_node_neg": (np.arange(2 * 7).reshape(2, 7) + 5) % N,
        },
    }
    return write_ogb_link(root, EDGES[4:], X, splits)


def _collab(root: Path) -> Path:
    """ogbl-collab's split dicts: edge/weight/year, valid/test edge_neg (global pairs)."""

    def part(e: np.ndarray[Any, Any], neg: bool) -> dict[str, Any]:
        d = {"edge": e, "weight": np.ones(len(e), dtype=np.int64), "year": np.full(len(e), 2019)}
        if neg:
            d["edge_neg"] = np.array([[0, 5], [1, 7], [2, 9]])
        return d

    splits = {"train": part(EDGES[4:], False), "valid": part(EDGES[:2], True)}
    splits["test"] = part(EDGES[2:4], True)
    return write_ogb_link(root, EDGES[4:], X, splits)


def _write(path: Path, text: str) -> None:
    with gzip.open(path, "wt") as f:
        f.write(text)


def test_citation2_layout_round_trips_with_per_positive_negatives(tmp_path: Path) -> None:
    data = load_ogb_link(_citation2(tmp_path / "ogbl_citation2"))
    assert data.num_nodes == N
    assert np.array_equal(data.x, X)
    assert np.array_equal(np.stack([data.src, data.dst], 1), EDGES[4:])
    assert data.given is not None
    valid, test = data.given["valid"], data.given["test"]
    assert valid.dst_neg is not None
    assert test.dst_neg is not None
    assert np.array_equal(valid.src, EDGES[:2, 0])
    assert np.array_equal(test.dst, EDGES[2:4, 1])
    assert np.array_equal(valid.dst_neg, np.arange(14).reshape(2, 7) % N)
    assert data.given["train"].dst_neg is None
    assert data.info["split_scheme"] == "time"


def test_collab_layout_reads_pairs_and_checks_but_does_not_use_global_negatives(
    tmp_path: Path,
) -> None:
    data = load_ogb_link(_collab(tmp_path / "ogbl_collab"))
    assert data.given is not None
    assert np.array_equal(data.given["test"].src, EDGES[2:4, 0])
    assert np.array_equal(data.given["test"].dst, EDGES[2:4, 1])
    assert data.given["valid"].dst_neg is None
    assert data.info["valid_dataset_negative_pairs_unused"] == 3


def test_split_dict_pt_is_read_like_the_three_files(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    split = root / "split" / "time"
    whole = {
        name: torch.load(split / f"{name}.pt", weights_only=False)
        for name in ("train", "valid", "test")
    }
    for name in ("train", "valid", "test"):
        (split / f"{name}.pt").unlink()
    torch.save(whole, split / "split_dict.pt")
    data = load_ogb_link(root)
    assert data.given is not None
    assert np.array_equal(data.given["valid"].src, EDGES[:2, 0])


def test_raw_only_when_the_split_is_not_asked_for(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    for f in (root / "split" / "time").iterdir():
        f.unlink()
    data = load_ogb_link(root, read_split=False)
    assert data.given is None
    assert data.num_edges == len(EDGES) - 4


def test_a_missing_split_file_names_it(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    (root / "split" / "time" / "valid.pt").unlink()
    with pytest.raises(DatasetError, match=r"split/time: valid\.pt is missing.*fromDataset"):
        load_ogb_link(root)


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        (
            "valid",
            {"source_node": np.array([0, 99])},
            r"source_node\[1\] holds node id 99 outside \[0, 12\)",
        ),
        ("test", {"target_node_neg": np.full((2, 7), -1)}, r"target_node_neg\[0\] holds node id"),
        (
            "train",
            {"target_node": np.array([1, 2, 3])},
            "source_node has 20 entries but target_node 3",
        ),
        (
            "valid",
            {"target_node_neg": np.zeros((3, 7), dtype=np.int64)},
            "target_node_neg has 3 rows",
        ),
        ("valid", {"target_node_neg": [[1, 2], [3]]}, "rows of different lengths"),
        ("test", {"source_node": np.array([0.5, 1.5])}, "source_node must be an integer array"),
    ],
)
def test_bad_citation2_split_entries_name_the_file_and_key(
    tmp_path: Path, name: str, change: dict[str, Any], message: str
) -> None:
    root = _citation2(tmp_path / "d")
    path = root / "split" / "time" / f"{name}.pt"
    d = torch.load(path, weights_only=False)
    d.update(change)
    torch.save(d, path)
    with pytest.raises(DatasetError, match=message) as info:
        load_ogb_link(root)
    assert info.value.source == str(path)


def test_bad_collab_pairs_name_the_file(tmp_path: Path) -> None:
    root = _collab(tmp_path / "d")
    path = root / "split" / "time" / "valid.pt"
    d = torch.load(path, weights_only=False)
    d["edge_neg"] = np.array([[0, 1, 2]])
    torch.save(d, path)
    with pytest.raises(DatasetError, match=r"valid\.pt: edge_neg must be \[E, 2\]"):
        load_ogb_link(root)


def test_an_unknown_split_dict_names_its_keys(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    torch.save({"heads": np.arange(3)}, root / "split" / "time" / "test.pt")
    with pytest.raises(DatasetError, match=r"holds keys \['heads'\]"):
        load_ogb_link(root)


def test_a_pickle_that_is_not_arrays_is_refused(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    torch.save({"source_node": Path("x")}, root / "split" / "time" / "test.pt")
    with pytest.raises(DatasetError, match="cannot be read as an OGB split dict"):
        load_ogb_link(root)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,1\n1,2,3\n", r"edge\.csv\.gz line 2: has 3 columns, expected 2"),
        ("0,1\n2,12\n", r"edge\.csv\.gz line 2: edge \(2, 12\) refers to a node outside"),
        ("0,1\nx,2\n", r"edge\.csv\.gz line 2: column 1 is 'x'"),
    ],
)
def test_ragged_or_out_of_range_edges_name_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    root = _citation2(tmp_path / "d")
    _write(root / "raw" / "edge.csv.gz", text)
    (root / "raw" / "num-edge-list.csv.gz").unlink()
    with pytest.raises(DatasetError, match=message):
        load_ogb_link(root)


def test_ragged_feature_rows_name_the_line(tmp_path: Path) -> None:
    root = _citation2(tmp_path / "d")
    rows = "\n".join(",".join(["0.5"] * (5 if i != 3 else 4)) for i in range(N))
    _write(root / "raw" / "node-feat.csv.gz", rows + "\n")
    with pytest.raises(DatasetError, match=r"node-feat\.csv\.gz line 4: has 4 columns, expected 5"):
        load_ogb_link(root)
