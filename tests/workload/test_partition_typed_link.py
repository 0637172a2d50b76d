"""The partition Job of a heterogeneous link-prediction job, as a real process: the typed
store gets the supervised edge type's split, written once, and no valid or test edge nor
its reverse is in any typed adjacency the samplers read. Bad edge types exit 2 naming the
field; a relation within one type leaves both directions of a held-out pair out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_api import contract as c
from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import parse_spec
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.ogb_hetero_writer import write_ogb_hetero
from distgnn_workload.partition import HeteroPartitionStore
from distgnn_workload.partition.link_edges import split_typed_edges
from distgnn_workload.partition.link_split import link_meta, read_link_split
from tests.support.partition_job import Job

WRITES: EdgeType = ("author", "writes", "paper")
REV: EdgeType = ("paper", "rev_writes", "author")
CITES: EdgeType = ("paper", "cites", "paper")
MAG = {"syntheticMag": {"scale": 0.002, "numFeatures": 8, "numClasses": 7}}
RSAGE = {"arch": "rsage", "numLayers": 2, "fanout": [4, 3]}


class LinkJob(Job):
    """A typed link-prediction job's partition step."""

    def __init__(
        self,
        tmp: Path,
        dataset: dict[str, Any],
        link: dict[str, Any],
        model: dict[str, Any] | None = None,
        training: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            tmp,
            dataset,
            {"numPartitions": 2},
            task="linkPrediction",
            linkPrediction=link,
            model=model or RSAGE,
            **({"training": training} if training else {}),
        )


def edge_set(store: HeteroPartitionStore, et: EdgeType) -> set[tuple[int, int]]:
    """``(src, dst)`` of every stored edge of ``et``."""
    indptr, indices = (np.asarray(a) for a in store.topology(et))
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return set(zip(indices.tolist(), dst.tolist(), strict=True))


def test_synthetic_mag_split_is_written_and_never_visible_to_message_passing(
    tmp_path: Path,
) -> None:
    job = LinkJob(
        tmp_path,
        MAG,
        {
            "edgeType": "author__writes__paper",
            "split": {"valid": 0.1, "test": 0.1},
            "evaluation": {"negatives": 20, "hitsAt": [1, 10]},
        },
    )
    done = job.run()
    assert done.returncode == 0, done.stderr
    store = HeteroPartitionStore.open(job.out)
    meta = link_meta(job.out)
    assert meta["edge_type"] == "author__writes__paper"
    assert meta["reverse_edge_type"] == "paper__rev_writes__author"
    writes, reverse = edge_set(store, WRITES), edge_set(store, REV)
    held = []
    for name in ("valid", "test"):
        split = read_link_split(job.out, name)
        assert split.dst_neg is not None
        assert split.dst_neg.shape == (len(split), 20)
        assert int(split.dst_neg.max()) < store.meta.node_counts["paper"]
        held += list(zip(split.src.tolist(), split.dst.tolist(), strict=True))
    assert held
    # no held-out edge in the relation, nor its reverse in the reverse relation
    assert not set(held) & writes
    assert not {(p, a) for a, p in held} & reverse
    # every training positive is in both; the two relations hold the same pairs
    train = read_link_split(job.out, "train")
    train_pairs = set(zip(train.src.tolist(), train.dst.tolist(), strict=True))
    assert train_pairs == writes
    assert {(p, a) for a, p in writes} == reverse
    assert meta["num_train"] == len(train_pairs) > 100
    assert meta["num_valid"] + meta["num_test"] == len(held)
    # training positives are stored with the partition owning their source
    owner = np.asarray(store.owner("author"))
    for p in range(2):
        part = read_link_split(job.out, "train", part=p)
        assert (owner[part.src.numpy()] == p).all()
    # other relations are untouched
    assert store.meta.edge_counts["paper__cites__paper"] > 0


def test_unknown_edge_type_of_ogb_files_exits_2_naming_the_field(tmp_path: Path) -> None:
    job = LinkJob(
        tmp_path,
        {"ogb": {"path": "datasets/mag"}, "hetero": {}},
        {"edgeType": "author__cites__paper"},
    )
    rng = np.random.default_rng(0)
    write_ogb_hetero(
        job.data / "datasets" / "mag",
        {"paper": 40, "author": 30},
        {WRITES: np.stack([rng.integers(0, 30, 200), rng.integers(0, 40, 200)], axis=1)},
        {"paper": rng.random((40, 4))},
        "paper",
        rng.integers(0, 3, 40),
        {"train": np.arange(30), "val": np.arange(30, 35), "test": np.arange(35, 40)},
    )
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT, done.stderr
    assert "spec.linkPrediction.edgeType" in done.stderr
    assert "author__writes__paper" in done.stderr


def _cites_graph(rng: np.random.Generator) -> HeteroGraphData:
    n = 60
    src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
    return HeteroGraphData.from_edges(
        {"paper": n},
        {CITES: (src, dst)},
        {"paper": rng.random((n, 4))},
        "paper",
        np.zeros(n, dtype=np.int64),
        np.ones(n, dtype=bool),
        np.zeros(n, dtype=bool),
        np.zeros(n, dtype=bool),
    )


def test_a_relation_within_one_type_drops_both_directions_of_a_held_out_pair() -> None:
    graph = _cites_graph(np.random.default_rng(1))
    lp = parse_spec(
        {
            "task": "linkPrediction",
            "linkPrediction": {
                "edgeType": "paper__cites__paper",
                "split": {"valid": 0.1, "test": 0.1},
            },
            "dataset": {"pyg": {"path": "g.pt"}, "hetero": {}},
            "model": RSAGE,
        }
    ).link_prediction
    assert lp is not None
    out, split = split_typed_edges(graph, lp, seed=0)
    assert split.reverse == CITES
    indptr, indices = out.in_csr[CITES]
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    kept = set(zip(np.asarray(indices).tolist(), dst.tolist(), strict=True))
    for name in ("valid", "test"):
        e = split.split(name)
        for a, b in zip(e.src.tolist(), e.dst.tolist(), strict=True):
            assert (a, b) not in kept
            assert (b, a) not in kept
    assert len(kept) == graph.num_edges(CITES) - 2 * (len(split.valid) + len(split.test))
    # excludeReverse false keeps the other direction visible
    keep_rev = lp.model_copy(update={"exclude_reverse": False})
    out2, split2 = split_typed_edges(graph, keep_rev, seed=0)
    assert split2.reverse is None
    assert out2.num_edges(CITES) == graph.num_edges(CITES) - len(split2.valid) - len(split2.test)


def test_a_reverse_that_is_not_an_edge_type_names_the_field() -> None:
    graph = _cites_graph(np.random.default_rng(2))
    lp = parse_spec(
        {
            "task": "linkPrediction",
            "linkPrediction": {"edgeType": "paper__cites__paper"},
            "dataset": {"pyg": {"path": "g.pt"}, "hetero": {}},
            "model": RSAGE,
        }
    ).link_prediction
    assert lp is not None
    bad = lp.model_copy(update={"reverse_edge_type": "paper__cited_by__paper"})
    with pytest.raises(DatasetError, match="reverseEdgeType") as err:
        split_typed_edges(graph, bad, seed=0)
    assert "paper__cited_by__paper" in str(err.value)
