"""The OGB raw-format loader, on small files the tests write (nothing is downloaded)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from distgnn_workload.data import DatasetError
from distgnn_workload.data.csr import edge_pairs
from distgnn_workload.data.ogb import load_ogb, write_ogb

N = 10
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 8], [8, 9], [9, 0]])


def _dataset(root: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_ogb(
        root,
        EDGES,
        rng.standard_normal((N, 4)).astype(np.float32),
        np.arange(N) % 3,
        {"train": np.arange(0, 6), "val": np.arange(6, 8), "test": np.arange(8, 10)},
    )


def _write(path: Path, text: str) -> None:
    with gzip.open(path, "wt") as f:
        f.write(text)


@pytest.fixture
def ds(tmp_path: Path) -> Path:
    return _dataset(tmp_path / "ogbn-tiny")


def test_round_trip(ds: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 4)).astype(np.float32)
    g = load_ogb(ds)
    assert g.num_nodes == N
    assert g.num_undirected_edges == len(EDGES)
    assert np.array_equal(g.x, x)  # float32 values survive the text format exactly
    assert np.array_equal(g.y, np.arange(N) % 3)
    assert g.num_classes == 3
    assert g.train_mask.sum() == 6
    assert np.flatnonzero(g.val_mask).tolist() == [6, 7]
    assert np.flatnonzero(g.test_mask).tolist() == [8, 9]
    assert g.info["split_scheme"] == "random"
    g.validate(deep=True)
    pairs = {tuple(p) for p in edge_pairs(g.indptr, g.indices).tolist()}
    assert pairs == {(a, b) for a, b in EDGES.tolist()} | {(b, a) for a, b in EDGES.tolist()}


def test_duplicates_self_loops_and_reverse_edges_are_dropped(ds: Path) -> None:
    _write(ds / "raw" / "edge.csv.gz", "0,1\n1,0\n0,1\n2,2\n3,4\n")
    (ds / "raw" / "num-edge-list.csv.gz").unlink()
    g = load_ogb(ds)
    assert g.num_undirected_edges == 2
    assert g.info["self_loops_dropped"] == 1
    assert g.info["duplicate_edges_dropped"] == 2


def test_plain_csv_files_are_accepted(ds: Path) -> None:
    edge = ds / "raw" / "edge.csv.gz"
    with gzip.open(edge, "rt") as f:
        (ds / "raw" / "edge.csv").write_text(f.read())
    edge.unlink()
    assert load_ogb(ds).num_undirected_edges == len(EDGES)


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("raw/edge.csv.gz", "0,1\n1,2\n2,3,4\n", r"edge.csv.gz line 3: has 3 columns, expected 2"),
        ("raw/edge.csv.gz", "0,1\n1\n", r"edge.csv.gz line 2: has 1 columns, expected 2"),
        ("raw/edge.csv.gz", "0,1\n1,x\n", r"edge.csv.gz line 2: column 2 is 'x', not an integer"),
        (
            "raw/edge.csv.gz",
            "0,1\n1,10\n",
            r"edge.csv.gz line 2: edge \(1, 10\) refers to a node outside \[0, 10\)",
        ),
        (
            "raw/edge.csv.gz",
            "0,1\n-1,2\n",
            r"edge.csv.gz line 2: edge \(-1, 2\) refers to a node outside",
        ),
        (
            "raw/node-label.csv.gz",
            "0\n1\n-2\n" + "0\n" * 7,
            r"node-label.csv.gz line 3: label -2 is negative",
        ),
        (
            "raw/node-label.csv.gz",
            "0\n1.5\n" + "0\n" * 8,
            r"node-label.csv.gz line 2: column 1 is '1.5', not an integer",
        ),
        (
            "raw/node-label.csv.gz",
            "0\n" * 9 + "123456\n",
            r"node-label.csv.gz line 10: label 123456 is out of range",
        ),
        (
            "raw/node-label.csv.gz",
            "0\n" * 9,
            r"node-label.csv.gz: has 9 labels but the graph has 10 nodes",
        ),
        (
            "raw/node-label.csv.gz",
            "0,1\n" * 10,
            r"node-label.csv.gz line 1: has 2 columns, expected 1",
        ),
        (
            "raw/node-feat.csv.gz",
            "0.5,1\n" * 9,
            r"node-feat.csv.gz: has 9 rows but the graph has 10 nodes",
        ),
        (
            "raw/node-feat.csv.gz",
            "0.5,1\n" * 4 + "0.5,abc\n" + "1,1\n" * 5,
            r"node-feat.csv.gz line 5: column 2 is 'abc', not a number",
        ),
        (
            "raw/node-feat.csv.gz",
            "0.5,1\n" * 4 + "0.5\n" + "1,1\n" * 5,
            r"node-feat.csv.gz line 5: has 1 columns, expected 2",
        ),
        (
            "raw/node-feat.csv.gz",
            "0.5,1\n" * 4 + "nan,1\n" + "1,1\n" * 5,
            r"node-feat.csv.gz line 5: holds a NaN",
        ),
        (
            "raw/num-edge-list.csv.gz",
            "11\n",
            r"edge.csv.gz: has 10 edges but num-edge-list says 11",
        ),
        ("raw/num-node-list.csv.gz", "10\n12\n", r"num-node-list.csv.gz: lists 2 graphs"),
        (
            "split/random/valid.csv.gz",
            "6\n12\n",
            r"valid.csv.gz line 2: node id 12 is outside \[0, 10\)",
        ),
        (
            "split/random/test.csv.gz",
            "8\n9\n3\n",
            r"test.csv.gz line 3: node 3 is also in the train split",
        ),
    ],
)
def test_malformed_files_name_file_and_line(ds: Path, file: str, text: str, message: str) -> None:
    _write(ds / file, text)
    with pytest.raises(DatasetError, match=message):
        load_ogb(ds)


def test_label_above_declared_class_count(ds: Path) -> None:
    with pytest.raises(
        DatasetError,
        match=r"node-label.csv.gz line 3: label 2 is out of range: at most num_classes=2",
    ):
        load_ogb(ds, num_classes=2)


def test_missing_split_file(ds: Path) -> None:
    (ds / "split" / "random" / "valid.csv.gz").unlink()
    with pytest.raises(DatasetError, match=r"split/random: valid.csv.gz is missing"):
        load_ogb(ds)


def test_missing_raw_file(ds: Path) -> None:
    (ds / "raw" / "edge.csv.gz").unlink()
    with pytest.raises(DatasetError, match=r"raw: edge.csv.gz is missing"):
        load_ogb(ds)


def test_split_scheme_must_be_chosen_when_ambiguous(ds: Path) -> None:
    shutil.copytree(ds / "split" / "random", ds / "split" / "sales_ranking")
    with pytest.raises(
        DatasetError,
        match=r"several split schemes \(random, sales_ranking\); set dataset.ogb.splitScheme",
    ):
        load_ogb(ds)
    assert load_ogb(ds, "sales_ranking").info["split_scheme"] == "sales_ranking"
    with pytest.raises(
        DatasetError, match=r"split scheme 'time' not found; .* one of random, sales_ranking"
    ):
        load_ogb(ds, "time")


def test_no_split_folder(ds: Path) -> None:
    shutil.rmtree(ds / "split")
    with pytest.raises(DatasetError, match=r"no split scheme"):
        load_ogb(ds)


def test_corrupt_gzip(ds: Path) -> None:
    data = (ds / "raw" / "node-feat.csv.gz").read_bytes()
    (ds / "raw" / "node-feat.csv.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"node-feat.csv.gz: cannot be read"):
        load_ogb(ds)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"is not a directory; dataset.ogb.path"):
        load_ogb(tmp_path / "nope")
