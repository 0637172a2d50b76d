"""``python -m distgnn_workload.partitioner`` on heterogeneous job configs, as a real process:
a syntheticMag job writes a typed store, a rerun is a no-op, OGB hetero files on the volume
load, and bad input exits 2 naming the field or file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_api import contract as c
from distgnn_workload.data.ogb_hetero_writer import write_ogb_hetero
from distgnn_workload.partition import (
    HeteroPartitionStore,
    PartitionStore,
    StoreError,
    load_hetero_partition,
)
from tests.support.partition_job import Job

MAG = {"syntheticMag": {"scale": 0.002, "numFeatures": 8, "numClasses": 7}}
RSAGE = {"arch": "rsage", "numLayers": 2, "fanout": [4, 3]}
MAG_TYPES = ["paper", "author", "institution", "field_of_study"]


class HeteroJob(Job):
    """A Job whose spec carries a relational model (and so may name edge types)."""

    def __init__(
        self,
        tmp: Path,
        dataset: dict[str, Any],
        partition: dict[str, Any],
        model: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(tmp, dataset, partition, model=model or RSAGE)


@pytest.mark.parametrize("algorithm", ["metis", "random"])
def test_synthetic_mag_job_writes_a_typed_store_and_a_rerun_is_a_no_op(
    tmp_path: Path, algorithm: str
) -> None:
    job = HeteroJob(tmp_path, MAG, {"numPartitions": 2, "algorithm": algorithm})
    first = job.run()
    assert first.returncode == 0, first.stderr
    events = [e for e in map(c.parse_progress_line, first.stdout.splitlines()) if e]
    assert events[0].stage == c.STAGE_GENERATE
    assert events[-1].stage == c.STAGE_PARTITION
    assert events[-1].metrics["edge_cut"] > 0
    assert "typed edges" in first.stdout

    store = HeteroPartitionStore.open(job.out)
    m = store.meta
    assert m.key == job.key
    assert m.algorithm == algorithm
    assert m.node_types == MAG_TYPES
    assert m.target_node_type == "paper"
    assert m.num_classes == 7
    assert m.num_features == {"paper": 8, "author": 0, "institution": 0, "field_of_study": 0}
    assert "paper__rev_writes__author" in m.edge_types
    assert m.extra["job"]["uid"] == "uid-1"
    assert m.extra["dataset"]["syntheticMag"]["scale"] == 0.002
    for t in MAG_TYPES:
        owned = [len(store.partition(p).nodes[t]) for p in range(2)]
        assert sum(owned) == m.node_counts[t]
    # The homogeneous reader refuses the typed store, naming the reader to use.
    with pytest.raises(StoreError, match="HeteroPartitionStore"):
        PartitionStore.open(job.out)

    created = m.extra["created_at"]
    again = job.run()
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout
    assert HeteroPartitionStore.open(job.out).meta.extra["created_at"] == created


def test_ogb_hetero_files_on_the_volume(tmp_path: Path) -> None:
    dataset = {
        "ogb": {"path": "datasets/mag"},
        "hetero": {"nodeTypes": ["paper", "author"], "edgeTypes": ["author__writes__paper"]},
    }
    job = HeteroJob(tmp_path, dataset, {"numPartitions": 2})
    rng = np.random.default_rng(0)
    writes = np.stack([rng.integers(0, 30, 200), rng.integers(0, 40, 200)], axis=1)
    y = rng.integers(0, 3, 40)
    splits = {"train": np.arange(30), "val": np.arange(30, 35), "test": np.arange(35, 40)}
    x = {"paper": rng.random((40, 4))}
    write_ogb_hetero(
        job.data / "datasets" / "mag",
        {"paper": 40, "author": 30},
        {("author", "writes", "paper"): writes},
        x,
        "paper",
        y,
        splits,
    )
    done = job.run()
    assert done.returncode == 0, done.stderr
    assert c.STAGE_LOAD in done.stdout
    part = load_hetero_partition(job.out, 1)
    assert part.meta.node_counts == {"author": 30, "paper": 40}
    assert part.meta.num_train_nodes == 30
    ids = np.asarray(part.nodes["paper"])
    assert np.allclose(part.x["paper"], x["paper"][ids].astype(np.float32))
    assert np.array_equal(part.y, y[ids])


@pytest.mark.parametrize(
    ("dataset", "model", "partitions", "message"),
    [
        (
            {"ogb": {"path": "datasets/absent"}, "hetero": {}},
            RSAGE,
            2,
            "datasets/absent",
        ),
        (
            {"pyg": {"path": "mag.pt"}, "hetero": {}},
            RSAGE,
            2,
            "mag.pt",
        ),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path,
    dataset: dict[str, Any],
    model: dict[str, Any],
    partitions: int,
    message: str,
) -> None:
    job = HeteroJob(tmp_path, dataset, {"numPartitions": partitions}, model)
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT, done.stderr
    assert message in done.stderr
    assert not job.out.exists()


def _write_writes_only(job: Job) -> None:
    """OGB hetero files at datasets/mag with one relation, author__writes__paper."""
    write_ogb_hetero(
        job.data / "datasets" / "mag",
        {"paper": 4, "author": 3},
        {("author", "writes", "paper"): [[0, 0], [1, 1], [2, 3]]},
        {"paper": np.zeros((4, 2))},
        "paper",
        np.array([0, 1, 0, 1]),
        {"train": [0, 1], "val": [2], "test": [3]},
    )


def test_declared_types_the_files_lack_exit_2_naming_the_field(tmp_path: Path) -> None:
    dataset = {
        "ogb": {"path": "datasets/mag"},
        "hetero": {"edgeTypes": ["author__writes__paper", "paper__cites__paper"]},
    }
    job = HeteroJob(tmp_path, dataset, {"numPartitions": 2})
    _write_writes_only(job)
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert "spec.dataset.hetero.edgeTypes" in done.stderr
    assert "paper__cites__paper" in done.stderr


def test_a_fanout_for_an_edge_type_the_files_lack_exits_2(tmp_path: Path) -> None:
    dataset = {"ogb": {"path": "datasets/mag"}, "hetero": {}}
    model = {**RSAGE, "edgeFanouts": {"paper__cites__paper": [2, 2]}}
    job = HeteroJob(tmp_path, dataset, {"numPartitions": 2}, model)
    _write_writes_only(job)
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert "spec.model.edgeFanouts" in done.stderr
    assert "paper__cites__paper is not an edge type of the dataset" in done.stderr
