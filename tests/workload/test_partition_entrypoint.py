"""``python -m distgnn_workload.partitioner`` as a real process: contract env in, store out.

Covers the no-op rerun, exit codes (2 for bad input, 1 for internal errors) and crash
safety: a partitioner killed mid-write leaves no ``_SUCCESS``, and a rerun completes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_api import contract as c
from distgnn_workload.data.ogb import write_ogb
from distgnn_workload.partition import PartitionStore
from tests.support.partition_job import Job

SMALL = {"synthetic": {"numNodes": 2000, "numEdges": 10000, "numFeatures": 8, "numClasses": 5}}


@pytest.mark.slow
def test_partitions_then_a_rerun_is_a_no_op(tmp_path: Path) -> None:
    job = Job(tmp_path, SMALL, {"numPartitions": 4})
    first = job.run()
    assert first.returncode == 0, first.stderr
    events = [e for e in map(c.parse_progress_line, first.stdout.splitlines()) if e]
    stages = [e.stage for e in events]
    assert c.STAGE_GENERATE in stages
    assert stages[-1] == c.STAGE_PARTITION
    assert events[-1].done == events[-1].total
    assert events[-1].metrics["edge_cut"] > 0
    assert "edge cut" in first.stdout

    store = PartitionStore.open(job.out)
    assert store.meta.key == job.key
    assert store.meta.num_partitions == 4
    assert store.meta.algorithm == "metis"
    assert store.meta.extra["job"]["uid"] == "uid-1"
    assert set(store.meta.extra["step_seconds"]) >= {"relabel", "write_topology"}
    created = store.meta.extra["created_at"]

    again = job.run()
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stdout
    assert "nothing to do" in again.stdout
    assert PartitionStore.open(job.out).meta.extra["created_at"] == created


@pytest.mark.slow
def test_ogb_dataset_on_the_volume(tmp_path: Path) -> None:
    job = Job(tmp_path, {"ogb": {"path": "datasets/tiny"}}, {"numPartitions": 2})
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 40, (120, 2))
    split = {"train": np.arange(20), "val": np.arange(20, 30), "test": np.arange(30, 40)}
    write_ogb(job.data / "datasets" / "tiny", edges, rng.random((40, 3)), np.arange(40) % 4, split)
    done = job.run()
    assert done.returncode == 0, done.stderr
    assert c.STAGE_LOAD in done.stdout
    store = PartitionStore.open(job.out)
    assert store.meta.num_nodes == 40
    assert store.meta.num_train_nodes == 20


def test_malformed_dataset_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    job = Job(tmp_path, {"ogb": {"path": "datasets/tiny"}}, {"numPartitions": 2})
    root = write_ogb(
        job.data / "datasets" / "tiny",
        np.array([[0, 1], [1, 2]]),
        np.zeros((3, 2)),
        np.array([0, 1, 0]),
        {"train": np.array([0]), "val": np.array([1]), "test": np.array([2])},
    )
    (root / "raw" / "node-label.csv.gz").unlink()
    (root / "raw" / "node-label.csv").write_text("0\n-1\n0\n")
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert "node-label.csv line 2: label -1 is negative" in done.stderr
    assert not job.out.exists()


@pytest.mark.parametrize(
    ("dataset", "partitions", "message"),
    [
        ({"ogb": {"path": "datasets/absent"}}, 2, "datasets/absent: is not a directory"),
        ({"pyg": {"path": "graph.pt"}}, 2, "graph.pt: not found"),
        (
            {"synthetic": {"numNodes": 6, "numEdges": 5}},
            8,
            "numPartitions=8 exceeds the graph's 6 nodes",
        ),
    ],
)
def test_bad_input_exits_2(
    tmp_path: Path, dataset: dict[str, Any], partitions: int, message: str
) -> None:
    done = Job(tmp_path, dataset, {"numPartitions": partitions}).run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert message in done.stderr


def test_missing_job_config_exits_2(tmp_path: Path) -> None:
    job = Job(tmp_path, SMALL, {"numPartitions": 2})
    job.config.unlink()
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert f"cannot read the job config {job.config} ({c.ENV_CONFIG})" in done.stderr
    assert not job.out.exists()


def test_a_job_config_of_another_job_uid_exits_2(tmp_path: Path) -> None:
    """The partitioner checks the job UID as every role does: a config of another run of the
    job never partitions into this run's volume."""
    job = Job(tmp_path, SMALL, {"numPartitions": 2})
    job.config.write_text(c.job_config_json("demo", "default", "uid-2", job.spec))
    done = job.run()
    assert done.returncode == c.EXIT_BAD_INPUT
    assert f"job UID uid-2 but {c.ENV_JOB_UID} is uid-1" in done.stderr
    assert not job.out.exists()


def test_unwritable_volume_is_an_internal_error(tmp_path: Path) -> None:
    job = Job(tmp_path, SMALL, {"numPartitions": 2})
    (job.data / c.PARTITIONS_DIR).write_text("a file where the partitions folder should be")
    done = job.run()
    assert done.returncode == c.EXIT_INTERNAL_ERROR
    assert "distgnn partition: internal error" in done.stderr


@pytest.mark.e2e
def test_killed_mid_write_leaves_no_success_marker_and_a_rerun_completes(tmp_path: Path) -> None:
    big = {
        "synthetic": {"numNodes": 300_000, "numEdges": 3_000_000, "numFeatures": 32},
    }
    job = Job(tmp_path, big, {"algorithm": "random", "numPartitions": 4})
    proc = subprocess.Popen(
        [sys.executable, "-m", c.role_module(c.Role.partitioner)],
        env=job.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    killed_at = None
    try:
        for line in proc.stdout:
            event = c.parse_progress_line(line)
            # The assignment is done at 0.4; past it the store files are being written.
            if event and event.stage == c.STAGE_PARTITION and 0.4 < event.done < 1.0:
                proc.send_signal(signal.SIGKILL)
                killed_at = event.done
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert killed_at is not None, "the partitioner finished before it could be killed"
    assert proc.returncode == -signal.SIGKILL
    assert job.markers() == []
    assert not job.out.exists()
    leftovers = list((job.data / c.PARTITIONS_DIR).iterdir())
    assert leftovers, "the killed writer should have left its temporary directory"
    assert all(p.name.startswith(f".{job.key}.tmp-") for p in leftovers)

    done = job.run()
    assert done.returncode == 0, done.stderr
    assert job.markers() == [job.out / c.SUCCESS_MARKER]
    assert [p.name for p in (job.data / c.PARTITIONS_DIR).iterdir()] == [job.key]
    assert PartitionStore.open(job.out).meta.num_nodes == 300_000


def test_the_partition_path_does_not_import_torch() -> None:
    code = (
        "import sys, distgnn_workload.partitioner.job, distgnn_workload.data.synthetic, "
        "distgnn_workload.data.ogb; print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'torch_geometric')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
