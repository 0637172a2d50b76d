"""The partition Job on link-prediction jobs, run as a real process: the store holds the
split once, the topology read back from it holds no valid or test pair in either direction,
the train positives sit with the owner of their source, the negatives are fixed by the
seed, and a bad link dataset exits 2 naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

from distgnn_workload.data.ogb_link import write_ogb_link
from distgnn_workload.partition import PartitionStore
from distgnn_workload.partition.link_split import link_meta, read_link_split
from tests.support.partition_job import Job

LINK = {"syntheticLink": {"scale": 0.001, "numFeatures": 16}}


class LinkJob(Job):
    """A link-prediction job's partition step (random partitions, two sampler holders)."""

    def __init__(self, tmp: Path, dataset: dict[str, Any], lp: dict[str, Any], parts: int = 4):
        super().__init__(
            tmp,
            dataset,
            {"numPartitions": parts, "algorithm": "random"},
            task="linkPrediction",
            linkPrediction=lp,
        )


def _pairs(store: PartitionStore) -> set[tuple[int, int]]:
    """Every directed edge of the store's topology, and of each partition's CSR."""
    indptr, indices = (np.asarray(a) for a in store.topology())
    src = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    whole = set(zip(src.tolist(), indices.tolist(), strict=True))
    parted: set[tuple[int, int]] = set()
    for p in range(store.num_partitions):
        part = store.partition(p)
        ptr: npt.NDArray[np.int64] = np.asarray(part.indptr, dtype=np.int64)
        degrees = ptr[1:] - ptr[:-1]
        rows = np.repeat(np.arange(part.start, part.end), degrees)
        parted |= set(zip(rows.tolist(), np.asarray(part.indices).tolist(), strict=True))
    assert parted == whole
    return whole


@pytest.fixture(scope="module")
def link_store(tmp_path_factory: pytest.TempPathFactory) -> PartitionStore:
    job = LinkJob(tmp_path_factory.mktemp("link"), LINK, {"evaluation": {"negatives": 100}})
    done = job.run()
    assert done.returncode == 0, done.stderr
    assert "no held-out edge in the topology" in done.stdout
    return PartitionStore.open(job.out)


def test_no_valid_or_test_edge_nor_its_reverse_is_visible_to_message_passing(
    link_store: PartitionStore,
) -> None:
    topology = _pairs(link_store)
    for name in ("valid", "test"):
        held = read_link_split(link_store.path, name)
        assert len(held) > 0
        for s, d in zip(held.src.tolist(), held.dst.tolist(), strict=True):
            assert (s, d) not in topology, (name, s, d)
            assert (d, s) not in topology, (name, d, s)
    train = read_link_split(link_store.path, "train")
    # Every training pair is in the topology, in both directions.
    for s, d in zip(train.src.tolist(), train.dst.tolist(), strict=True):
        assert (s, d) in topology
        assert (d, s) in topology
    assert len(topology) == 2 * len(train)


def test_meta_records_the_task_and_the_split_sizes(link_store: PartitionStore) -> None:
    meta = link_meta(link_store.path)
    assert link_store.meta.extra["task"] == "linkPrediction"
    e = 30_561  # round(30,561,187 * 0.001), all distinct
    assert meta["num_valid"] == meta["num_test"] == round(0.05 * e)
    assert meta["num_train"] == e - 2 * round(0.05 * e)
    assert meta["valid_negatives"] == meta["test_negatives"] == 100


def test_train_positives_are_partitioned_by_the_owner_of_their_source(
    link_store: PartitionStore,
) -> None:
    whole = read_link_split(link_store.path, "train")
    shares = [read_link_split(link_store.path, "train", part=p) for p in range(4)]
    assert sum(len(s) for s in shares) == len(whole)
    for p, share in enumerate(shares):
        assert len(share) > 0
        assert share.dst_neg is None
        owners = link_store.partition_of(share.src.numpy())
        assert (owners == p).all()
    valid = read_link_split(link_store.path, "valid")
    assert valid.dst_neg is not None
    assert valid.dst_neg.shape == (len(valid), 100)
    assert valid.dst_neg.dtype == torch.int64
    assert int(valid.dst_neg.max()) < link_store.meta.num_nodes


def test_the_split_and_negatives_are_fixed_by_the_seed(
    tmp_path: Path, link_store: PartitionStore
) -> None:
    again = LinkJob(tmp_path, LINK, {"evaluation": {"negatives": 100}})
    assert again.key == link_store.meta.key
    assert again.run().returncode == 0
    other = PartitionStore.open(again.out)
    orig_a, orig_b = np.asarray(link_store.orig_ids()), np.asarray(other.orig_ids())
    for name in ("valid", "test"):
        a, b = read_link_split(link_store.path, name), read_link_split(other.path, name)
        assert a.dst_neg is not None
        assert b.dst_neg is not None
        assert np.array_equal(orig_a[a.src.numpy()], orig_b[b.src.numpy()])
        assert np.array_equal(orig_a[a.dst_neg.numpy()], orig_b[b.dst_neg.numpy()])


def _citation2_like(root: Path, n: int = 60) -> tuple[Path, dict[str, dict[str, Any]]]:
    rng = np.random.default_rng(0)
    src = rng.integers(0, n, 400)
    dst = (src + rng.integers(1, n, 400)) % n
    edges = np.stack([src, dst], axis=1)
    held = {"valid": edges[:20], "test": edges[20:40]}
    splits: dict[str, dict[str, Any]] = {
        "train": {"source_node": edges[40:, 0], "target_node": edges[40:, 1]},
    }
    for name, e in held.items():
        splits[name] = {
            "source_node": e[:, 0],
            "target_node": e[:, 1],
            "target_node_neg": rng.integers(0, n, (len(e), 30)),
        }
    # The training graph's edge list also holds the held-out pairs, one reversed: the
    # partition step must still keep them out of the topology.
    listed = np.concatenate([edges[40:], held["valid"][:, ::-1], held["test"]])
    write_ogb_link(root, listed, rng.standard_normal((n, 4)), splits)
    return root, splits


@pytest.mark.slow
def test_from_dataset_keeps_the_datasets_negatives_and_no_held_out_pair(tmp_path: Path) -> None:
    job = LinkJob(
        tmp_path,
        {"ogb": {"path": "ogbl"}},
        {"split": {"fromDataset": True}, "evaluation": {"negatives": 20, "hitsAt": [1, 10]}},
        parts=2,
    )
    _, splits = _citation2_like(job.data / "ogbl")
    done = job.run()
    assert done.returncode == 0, done.stderr
    store = PartitionStore.open(job.out)
    orig = np.asarray(store.orig_ids())
    topology = _pairs(store)
    for name in ("valid", "test"):
        got = read_link_split(store.path, name)
        assert got.dst_neg is not None
        want = splits[name]
        assert np.array_equal(orig[got.src.numpy()], want["source_node"])
        assert np.array_equal(orig[got.dst_neg.numpy()], want["target_node_neg"][:, :20])
        for s, d in zip(got.src.tolist(), got.dst.tolist(), strict=True):
            assert (s, d) not in topology
            assert (d, s) not in topology


@pytest.mark.slow
def test_bad_link_datasets_exit_2_naming_the_file(tmp_path: Path) -> None:
    job = LinkJob(tmp_path, {"ogb": {"path": "ogbl"}}, {"split": {"fromDataset": True}}, parts=2)
    root, _ = _citation2_like(job.data / "ogbl")
    (root / "split" / "time" / "test.pt").unlink()
    done = job.run()
    assert done.returncode == 2
    assert "test.pt is missing" in done.stderr
    assert "split/time" in done.stderr
