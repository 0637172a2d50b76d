"""The OGB heterogeneous raw-format loader, on small files in ogbn-mag's layout."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data import DatasetError
from distgnn_workload.data.ogb_hetero import load_ogb_hetero
from distgnn_workload.data.ogb_hetero_writer import write_ogb_hetero

COUNTS = {"paper": 8, "author": 5, "institution": 2, "field_of_study": 3}
WRITES: EdgeType = ("author", "writes", "paper")
CITES: EdgeType = ("paper", "cites", "paper")
HAS_TOPIC: EdgeType = ("paper", "has_topic", "field_of_study")
AFFILIATED: EdgeType = ("author", "affiliated_with", "institution")
EDGES: dict[EdgeType, list[list[int]]] = {
    WRITES: [[0, 0], [0, 1], [1, 1], [2, 3], [3, 4], [4, 7], [4, 6]],
    CITES: [[0, 1], [1, 2], [2, 0], [5, 6], [7, 5], [3, 3]],
    HAS_TOPIC: [[0, 0], [1, 0], [2, 1], [6, 2], [7, 2]],
    AFFILIATED: [[0, 0], [1, 0], [3, 1]],
}
Y = np.array([0, 1, 2, 0, 1, 2, 0, -1])
SPLITS = {"train": [0, 1, 2, 3], "val": [4, 5], "test": [6]}
RAW = "raw"
REL = "raw/relations"


def _x() -> npt.NDArray[np.float32]:
    return np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)


@pytest.fixture
def ds(tmp_path: Path) -> Path:
    return write_ogb_hetero(
        tmp_path / "mag-tiny", COUNTS, EDGES, {"paper": _x()}, "paper", Y, SPLITS
    )


def _write(path: Path, text: str) -> None:
    with gzip.open(path, "wt") as f:
        f.write(text)


def _pairs(csr: tuple[npt.NDArray[Any], npt.NDArray[Any]]) -> set[tuple[int, int]]:
    indptr, indices = csr
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return set(zip(indices.tolist(), dst.tolist(), strict=True))


def test_round_trip(ds: Path) -> None:
    g = load_ogb_hetero(ds)
    g.validate(deep=True)
    assert g.node_counts == {"author": 5, "field_of_study": 3, "institution": 2, "paper": 8}
    assert g.edge_types == [
        AFFILIATED,
        WRITES,
        CITES,
        HAS_TOPIC,
        ("institution", "rev_affiliated_with", "author"),
        ("paper", "rev_writes", "author"),
        ("field_of_study", "rev_has_topic", "paper"),
    ]
    for et, pairs in EDGES.items():
        assert _pairs(g.in_csr[et]) >= {(s, d) for s, d in pairs}
    assert _pairs(g.in_csr[CITES]) == {(s, d) for s, d in EDGES[CITES]} | {
        (d, s) for s, d in EDGES[CITES]
    }
    assert _pairs(g.in_csr[("paper", "rev_writes", "author")]) == {(d, s) for s, d in EDGES[WRITES]}
    assert list(g.x) == ["paper"]
    assert np.array_equal(g.x["paper"], _x())  # float32 survives the text format exactly
    assert g.featureless_types == ["author", "field_of_study", "institution"]
    assert g.target_node_type == "paper"
    assert g.y.tolist() == Y.tolist()
    assert g.num_classes == 3
    assert np.flatnonzero(g.train_mask).tolist() == SPLITS["train"]
    assert np.flatnonzero(g.val_mask).tolist() == SPLITS["val"]
    assert np.flatnonzero(g.test_mask).tolist() == SPLITS["test"]
    assert g.info["split_scheme"] == "time"
    assert g.info["self_loops"] == {"paper__cites__paper": 1}
    assert g.in_csr[WRITES][1].dtype == np.int32


def test_plain_csv_and_no_optional_tables(ds: Path) -> None:
    edge = ds / REL / "author___writes___paper" / "edge.csv.gz"
    with gzip.open(edge, "rt") as f:
        edge.with_suffix("").write_text(f.read())
    edge.unlink()
    (ds / RAW / "nodetype-has-label.csv.gz").unlink()
    (ds / "split" / "time" / "nodetype-has-split.csv.gz").unlink()
    (ds / REL / "author___writes___paper" / "num-edge-list.csv.gz").unlink()
    g = load_ogb_hetero(ds)
    assert _pairs(g.in_csr[WRITES]) == {(s, d) for s, d in EDGES[WRITES]}
    assert g.target_node_type == "paper"


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        (f"{REL}/author___writes___paper/edge.csv.gz", "0,0\n1,1,1\n", r"line 2: has 3 columns"),
        (f"{REL}/author___writes___paper/edge.csv.gz", "0,0\n1\n", r"line 2: has 1 columns"),
        (
            f"{REL}/author___writes___paper/edge.csv.gz",
            "0,0\n5,1\n",
            r"author___writes___paper/edge.csv.gz line 2: edge \(5, 1\): source 5 is outside "
            r"\[0, 5\): author has 5 nodes",
        ),
        (
            f"{REL}/paper___has_topic___field_of_study/edge.csv.gz",
            "0,0\n1,0\n2,-1\n",
            r"edge.csv.gz line 3: edge \(2, -1\): destination -1 is outside \[0, 3\)",
        ),
        (
            f"{REL}/paper___cites___paper/num-edge-list.csv.gz",
            "7\n",
            r"paper___cites___paper/edge.csv.gz: has 6 edges but num-edge-list says 7",
        ),
        (
            f"{RAW}/num-node-dict.csv.gz",
            "author,field_of_study,institution,paper\n5,3,x,8\n",
            r"num-node-dict.csv.gz line 2: the node count of 'institution' is 'x'",
        ),
        (
            f"{RAW}/num-node-dict.csv.gz",
            "author,field_of_study,institution,paper\n5,3,2\n",
            r"num-node-dict.csv.gz line 2: has 3 values for 4 node types",
        ),
        (
            f"{RAW}/num-node-dict.csv.gz",
            "author,field_of_study,institution,paper\n5,3,2,8\n5,3,2,8\n",
            r"num-node-dict.csv.gz: has 3 lines",
        ),
        (
            f"{RAW}/num-node-dict.csv.gz",
            "author,field_of_study,institution,paper\n5,3,2,7\n",
            r"node-label.csv.gz: has 8 labels but paper has 7 nodes",
        ),
        (
            f"{RAW}/triplet-type-list.csv.gz",
            "author,writes,paper\npaper,cites,venue\n",
            r"triplet-type-list.csv.gz line 2: node type 'venue' is not in num-node-dict",
        ),
        (
            f"{RAW}/triplet-type-list.csv.gz",
            "author,writes,paper\npaper,cites\n",
            r"triplet-type-list.csv.gz line 2: has 2 columns, expected 3",
        ),
        (
            f"{RAW}/node-feat/paper/node-feat.csv.gz",
            "1,2,3\n" * 3 + "1,2\n" + "1,2,3\n" * 4,
            r"node-feat.csv.gz line 4: has 2 columns, expected 3",
        ),
        (
            f"{RAW}/node-feat/paper/node-feat.csv.gz",
            "1,2,3\n" * 5 + "1,inf,3\n" + "1,2,3\n" * 2,
            r"node-feat.csv.gz line 6: holds a NaN or infinite feature",
        ),
        (
            f"{RAW}/node-label/paper/node-label.csv.gz",
            "0\n1\n2\n0\n1\n2\n0.5\nnan\n",
            r"node-label.csv.gz line 7: label 0.5 is not a class",
        ),
        (
            f"{RAW}/node-label/paper/node-label.csv.gz",
            "0\n1\n2\n0\n1\n2\n0\n",
            r"node-label.csv.gz: has 7 labels but paper has 8 nodes",
        ),
        (
            "split/time/paper/valid.csv.gz",
            "4\n8\n",
            r"valid.csv.gz line 2: node id 8 is outside \[0, 8\)",
        ),
        (
            "split/time/paper/test.csv.gz",
            "6\n2\n",
            r"test.csv.gz line 2: node 2 is also in the train split",
        ),
        (
            "split/time/paper/test.csv.gz",
            "6\n7\n",
            r"test.csv.gz: selects paper node 7, which has no label in node-label.csv.gz",
        ),
        (
            f"{RAW}/nodetype-has-label.csv.gz",
            "author,field_of_study,institution,paper\nFalse,False,False,yes\n",
            r"nodetype-has-label.csv.gz line 2: 'paper' is 'yes'; write True or False",
        ),
        (
            f"{RAW}/nodetype-has-label.csv.gz",
            "author,field_of_study,institution,paper\nTrue,False,False,True\n",
            r"nodetype-has-label.csv.gz: 2 node types have labels \(author, paper\); name the "
            "target node type",
        ),
    ],
)
def test_malformed_files_name_file_and_line(ds: Path, file: str, text: str, message: str) -> None:
    _write(ds / file, text)
    with pytest.raises(DatasetError, match=message):
        load_ogb_hetero(ds)


def test_missing_relation_file(ds: Path) -> None:
    (ds / REL / "paper___cites___paper" / "edge.csv.gz").unlink()
    with pytest.raises(
        DatasetError,
        match=r"paper___cites___paper: edge.csv.gz is missing; the edge type paper,cites,paper "
        "is in triplet-type-list",
    ):
        load_ogb_hetero(ds)


def test_feature_rows_must_match_the_count(ds: Path) -> None:
    _write(ds / RAW / "node-feat" / "paper" / "node-feat.csv.gz", "1,2\n" * 7)
    with pytest.raises(DatasetError, match=r"node-feat.csv.gz: has 7 rows but paper has 8 nodes"):
        load_ogb_hetero(ds)


def test_missing_count_table(ds: Path) -> None:
    (ds / RAW / "num-node-dict.csv.gz").unlink()
    with pytest.raises(DatasetError, match=r"raw: num-node-dict.csv.gz is missing"):
        load_ogb_hetero(ds)


def test_target_type_choice(ds: Path) -> None:
    with pytest.raises(
        DatasetError,
        match=r"'author' \(spec.dataset.hetero.targetNodeType\) has no labels; .* paper",
    ):
        load_ogb_hetero(ds, target_node_type="author")
    with pytest.raises(
        DatasetError, match=r"'venue' \(spec.dataset.hetero.targetNodeType\) is not one of"
    ):
        load_ogb_hetero(ds, target_node_type="venue")
    assert load_ogb_hetero(ds, target_node_type="paper", num_classes=349).num_classes == 349
    with pytest.raises(DatasetError, match=r"line 3: label 2 is not a class: .* 0..1"):
        load_ogb_hetero(ds, num_classes=2)


def test_split_scheme_choice(ds: Path) -> None:
    shutil.copytree(ds / "split" / "time", ds / "split" / "random")
    with pytest.raises(DatasetError, match=r"several split schemes \(random, time\)"):
        load_ogb_hetero(ds)
    assert load_ogb_hetero(ds, "random").info["split_scheme"] == "random"
    (ds / "split" / "random" / "paper" / "train.csv.gz").unlink()
    with pytest.raises(DatasetError, match=r"split/random/paper: train.csv.gz is missing"):
        load_ogb_hetero(ds, "random")
