"""The out-of-core partition path: streamed input, external bucket sort, chunked store.

The store it writes must be the in-memory writer's, array for array, for the same graph and
assignment; its synthetic stream must carry generate()'s node data; the partition Job must
take it when asked (or when the model says the graph will not fit) and exit 2 on bad input.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_api import contract as c
from distgnn_api.spec import PartitionAlgorithm, PartitionSpec, SyntheticDataset
from distgnn_workload.data.csv_files import iter_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.ogb import load_ogb, write_ogb
from distgnn_workload.data.ogb_stream import stream_ogb
from distgnn_workload.data.synthetic import generate
from distgnn_workload.data.synthetic_stream import stream_synthetic
from distgnn_workload.partition import PartitionStore
from distgnn_workload.partition.algorithms import random_assignment
from distgnn_workload.partition.external_sort import EdgeBuckets
from distgnn_workload.partition.ooc_writer import write_streamed
from distgnn_workload.partition.writer import write_partitions
from tests.support.partition_job import Job
from tests.workload.test_partition_entrypoint import SMALL


def npy_files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*.npy"))


def assert_same_store(a: Path, b: Path) -> None:
    files = npy_files(a)
    assert files == npy_files(b)
    assert len(files) > 10
    for rel in files:
        x, y = np.load(a / rel), np.load(b / rel)
        assert x.dtype == y.dtype, rel
        assert np.array_equal(x, y), rel


def write_messy_ogb(root: Path, n: int = 300, m: int = 2500, seed: int = 0) -> Path:
    """An OGB dataset whose edge list has duplicates, both directions and self-loops."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, (m, 2))
    edges = np.concatenate([edges, edges[:200, ::-1], edges[:100], [[5, 5], [7, 7]]])
    perm = rng.permutation(n)
    split = {"train": perm[:150], "val": perm[150:200], "test": perm[200:]}
    return write_ogb(root, edges, rng.random((n, 6)), rng.integers(0, 7, n), split)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_ogb_store_equals_the_in_memory_store(tmp_path: Path, k: int) -> None:
    root = write_messy_ogb(tmp_path / "ds")
    spec = PartitionSpec(algorithm=PartitionAlgorithm.random, seed=11)
    graph = load_ogb(root)
    parts = random_assignment(graph.num_nodes, k, spec.seed)
    mem = write_partitions(tmp_path / "mem", graph, k, assignment=parts, spec=spec)
    # Tiny chunks and buckets: many CSV chunks, many buckets per partition.
    streamed = stream_ogb(root, chunk_rows=97)
    ooc = write_streamed(tmp_path / "ooc", streamed, parts, k, spec=spec, budget=300)
    assert_same_store(tmp_path / "mem", tmp_path / "ooc")
    assert ooc.meta.partitions == mem.meta.partitions
    assert ooc.meta.edge_cut == mem.meta.edge_cut
    assert ooc.meta.balance == mem.meta.balance
    for fact in ("self_loops_dropped", "duplicate_edges_dropped", "split_scheme"):
        assert ooc.meta.extra["graph_info"][fact] == mem.meta.extra["graph_info"][fact]
    assert ooc.meta.extra["out_of_core"] is True
    assert not list((tmp_path).glob(".ooc.tmp-*")), "the staging directory must be gone"


def test_synthetic_stream_carries_generate_node_data() -> None:
    spec = SyntheticDataset(num_nodes=1500, num_edges=9000, num_features=12, num_classes=6)
    graph = generate(spec)
    streamed = stream_synthetic(spec, chunk=1000)
    assert np.array_equal(streamed.y, graph.y)
    for split in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(streamed, split), getattr(graph, split))
    assert np.array_equal(np.concatenate(list(streamed.features())), graph.x)
    pairs = np.concatenate([np.stack(p, axis=1) for p in streamed.edges()])
    assert pairs.shape == (9000, 2)
    again = np.concatenate([np.stack(p, axis=1) for p in streamed.edges()])
    assert np.array_equal(pairs, again), "every pass must draw the same edges"
    # The same family: intra-community share near the homophily, as in memory.
    intra = np.mean(graph.y[pairs[:, 0]] == graph.y[pairs[:, 1]])
    assert abs(intra - spec.homophily) < 0.05


def test_synthetic_store_is_a_valid_graph_with_generate_rows(tmp_path: Path) -> None:
    spec = SyntheticDataset(num_nodes=2000, num_edges=12000, num_features=8, num_classes=5)
    streamed = stream_synthetic(spec, chunk=2500)
    parts = random_assignment(streamed.num_nodes, 4, 0)
    store = write_streamed(tmp_path / "s", streamed, parts, 4, budget=2000)
    g = store.to_graph()
    g.validate(deep=True)  # symmetric, sorted rows, no self-loops or duplicates
    info = store.meta.extra["graph_info"]
    assert (
        store.meta.num_undirected_edges
        == 12000 - info["duplicate_edges_dropped"] - info["self_loops_dropped"]
    )
    assert store.meta.num_undirected_edges > 0.9 * 12000
    orig = generate(spec)
    old = store.orig_ids()
    assert np.array_equal(g.x, orig.x[old])
    assert np.array_equal(g.y, orig.y[old])
    assert np.array_equal(store.partition_book(), parts)


def test_an_overfull_bucket_is_read_in_several_passes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 500
    src, dst = rng.integers(0, n, 20000), rng.integers(0, n, 20000)
    buckets = EdgeBuckets(tmp_path / "b", np.array([0, 200, n]), n, budget=1000)
    buckets.add(src[:7000], dst[:7000])
    buckets.add(src[7000:], dst[7000:])
    blocks = list(buckets.rows())
    assert len(blocks) > 2, "each bucket holds far more than twice the budget"
    assert not list((tmp_path / "b").iterdir()), "read buckets are deleted"
    keep = src != dst
    s = np.concatenate([src[keep], dst[keep]])
    d = np.concatenate([dst[keep], src[keep]])
    want = np.unique(s * n + d)
    got_rows = np.concatenate([np.repeat(np.arange(b.start, b.end), b.degrees) for b in blocks])
    got = got_rows * n + np.concatenate([b.targets for b in blocks])
    assert np.array_equal(got, want)
    assert buckets.self_loops == int(np.count_nonzero(~keep))


def test_chunked_csv_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "edge.csv.gz"
    lines = [f"{i},{i + 1}" for i in range(250)]
    lines[212] = "212,x"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"edge.csv.gz line 213: column 2 is 'x'"):
        list(iter_csv(path, np.int64, 2, rows=50))
    lines[212] = "212,213,7"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    with pytest.raises(DatasetError, match=r"line 213: has 3 columns, expected 2"):
        list(iter_csv(path, np.int64, 2, rows=50))


def test_streamed_ogb_checks_as_the_loader_does(tmp_path: Path) -> None:
    root = write_messy_ogb(tmp_path / "ds", n=50, m=100)
    with gzip.open(root / "raw" / "edge.csv.gz", "at") as f:
        f.write("3,50\n")
    streamed = stream_ogb(root, chunk_rows=30)
    with pytest.raises(DatasetError, match=r"line 303: edge \(3, 50\) refers to a node outside"):
        list(streamed.edges())
    with gzip.open(root / "raw" / "node-feat.csv.gz", "at") as f:
        f.write("1,2,3,4,5,6\n")
    with pytest.raises(DatasetError, match="has more than 50 rows but the graph has 50 nodes"):
        list(stream_ogb(root).features())


def job_in(tmp: Path, dataset: dict[str, Any], partition: dict[str, Any]) -> Job:
    tmp.mkdir()
    return Job(tmp, dataset, partition)


def job_run(job: Job) -> PartitionStore:
    done = job.run()
    assert done.returncode == 0, done.stderr
    return PartitionStore.open(job.out)


def test_job_takes_the_path_when_asked(tmp_path: Path) -> None:
    job = job_in(
        tmp_path / "a", SMALL, {"numPartitions": 4, "algorithm": "random", "outOfCore": "always"}
    )
    store = job_run(job)
    assert store.meta.extra["out_of_core"] is True
    assert store.meta.algorithm == "random"
    probed = store.meta.extra["sampling_probe"]
    assert probed["holders"] == 2
    assert probed["distinct_nodes"] > probed["remote_nodes"] > 0
    assert store.meta.key == job.key
    never = job_in(
        tmp_path / "b", SMALL, {"numPartitions": 4, "algorithm": "random", "outOfCore": "never"}
    )
    assert never.key != job.key, "a streamed synthetic graph is another graph: another key"
    assert "out_of_core" not in job_run(never).meta.extra


def test_auto_streams_when_the_model_says_the_graph_will_not_fit(tmp_path: Path) -> None:
    tight: dict[str, Any] = {"numPartitions": 2, "resources": {"limits": {"memory": "40Mi"}}}
    job = job_in(tmp_path / "a", SMALL, tight)
    done = job.run()
    assert done.returncode == 0, done.stderr
    assert "assigning nodes at random" in done.stderr  # METIS needs the whole graph
    store = PartitionStore.open(job.out)
    assert store.meta.extra["out_of_core"] is True
    assert store.meta.algorithm == "random"
    roomy = job_in(tmp_path / "b", SMALL, {**tight, "resources": {"limits": {"memory": "1Gi"}}})
    assert job_run(roomy).meta.algorithm == "metis"


def test_job_bad_ogb_input_exits_2(tmp_path: Path) -> None:
    job = Job(
        tmp_path,
        {"ogb": {"path": "datasets/m"}},
        {"numPartitions": 2, "algorithm": "random", "outOfCore": "always"},
    )
    root = write_messy_ogb(job.data / "datasets" / "m", n=40, m=60)
    with gzip.open(root / "raw" / "edge.csv.gz", "at") as f:
        f.write("1,99\n")
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert "edge.csv.gz line 183: edge (1, 99) refers to a node outside [0, 40)" in done.stderr
    assert not job.out.exists()
    assert not list((job.data / c.PARTITIONS_DIR).iterdir()), "no staging directory is left"


def test_job_runs_metis_on_a_sample_out_of_core(tmp_path: Path) -> None:
    """metisSampleEdges: METIS on a sampled subgraph, the rest streamed; META.json and the
    Job's log carry the measured cut, far below a random assignment's."""
    # strong communities (the defaults' are weak): METIS has structure to find
    dataset = {
        "synthetic": {
            "numNodes": 6000,
            "numEdges": 60000,
            "numFeatures": 4,
            "numClasses": 8,
            "homophily": 0.8,
        }
    }
    sampled = job_in(
        tmp_path / "a",
        dataset,
        {"numPartitions": 4, "outOfCore": "always", "metisSampleEdges": 30000},
    )
    done = sampled.run()
    assert done.returncode == 0, done.stderr
    store = PartitionStore.open(sampled.out)
    assert store.meta.algorithm == "metis"
    how = store.meta.extra["out_of_core_assignment"]
    assert 0 < how["sample_nodes"] < 6000
    assert "a random assignment cuts about 0.7500" in done.stderr
    assert f"edge cut: {store.meta.edge_cut} of" in done.stderr
    rand = job_in(
        tmp_path / "b", dataset, {"numPartitions": 4, "algorithm": "random", "outOfCore": "always"}
    )
    assert rand.key != sampled.key
    random_cut = job_run(rand).meta.edge_cut_fraction
    assert random_cut > 0.7
    assert store.meta.edge_cut_fraction < 0.6 * random_cut
