"""The CPU workload image, from its root filesystem (read-only, uid 10001, shells masked).

The partition Job's command, then one sampler and two trainers on a tiny graph, each with the command and the contract env that the operator's builders write (rendered and
mapped to this machine by the local launch plan, the contract's one writer), talking over
loopback and sharing a volume. The image holds torch, PyG, pymetis and prometheus-client, and
neither kopf nor the kubernetes client.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_api.spec import parse_spec
from distgnn_operator.local.job_plan import plan_job, render_job
from distgnn_operator.local.launch_plan import LocalLayout, ProcessSpec
from tests.images.hygiene import IMPORTS, READ_ONLY, assert_hygiene, run_in
from tests.support.image_run import IMAGE_UID, Bind, ImageRoot

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]

RUN_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def cpu_root(unpacked: Callable[[str], ImageRoot]) -> ImageRoot:
    return unpacked("workload-cpu")


def tiny_job_spec() -> dict[str, object]:
    return {
        "dataset": {
            "synthetic": {"numNodes": 600, "numEdges": 3000, "numFeatures": 8, "numClasses": 4}
        },
        "samplers": {"replicas": 1, "workers": 1},
        "trainers": {"replicas": 2, "gpusPerPod": 0},
        "model": {"hiddenChannels": 16, "numLayers": 2, "fanout": [5, 5]},
        "training": {"epochs": 1, "batchSize": 64},
    }


def start(image: ImageRoot, spec: ProcessSpec) -> subprocess.Popen[bytes]:
    """One process of the plan from the image: the builders' command (``python -m
    distgnn_workload.<role>``), the contract env and what the plan adds for loopback."""
    argv = list(spec.argv)
    if argv[0] == sys.executable:  # the local plan's stand-in for the image's python
        argv[0] = "python"
    env = {k: v for k, v in spec.env.items() if os.environ.get(k) != v}
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log_path, "wb") as log:
        return subprocess.Popen(
            image.command(argv, cwd=str(spec.cwd)),
            env=image.environ(env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def wait_all(procs: dict[str, subprocess.Popen[bytes]], log_dir: Path) -> dict[str, int]:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    codes: dict[str, int] = {}
    try:
        for name, proc in procs.items():
            codes[name] = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    logs = "\n".join(
        f"===== {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted(log_dir.glob("*.log"))
    )
    assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n{logs}"
    return codes


def chown_tree(path: Path, uid: int) -> None:
    """The volume belongs to the pods' user (what fsGroup does on a cluster)."""
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.chown(name, uid, uid)


def test_workload_cpu_image_holds_the_workload_and_not_the_operator(cpu_root: ImageRoot) -> None:
    assert_hygiene(cpu_root)
    version, cuda, has_cuda = run_in(cpu_root, ["python", "-c", IMPORTS]).split()
    assert version.startswith("2."), version
    assert has_cuda == "True", (version, cuda)
    assert run_in(cpu_root, ["python", "-c", READ_ONLY]).strip() == "errno EROFS"


def test_workload_cpu_image_partitions_and_trains(cpu_root: ImageRoot, tmp_path: Path) -> None:
    spec = parse_spec(tiny_job_spec())
    uid = uuid.uuid4().hex
    volume = tmp_path / "volume"
    data_dir = volume / "data"
    layout = LocalLayout(
        job_name="image", namespace="local", data_dir=data_dir, run_dir=c.run_dir(data_dir, uid)
    )
    plan = plan_job(layout, render_job("image", uid, spec, partition_reused=False), threads=1)
    assert plan.partition, "the rendered job has no partition Job"
    assert [(s.role, s.rank) for s in plan.workload] == [
        (c.Role.sampler, 0), (c.Role.trainer, 0), (c.Role.trainer, 1),
    ]  # fmt: skip
    layout.log_dir.mkdir(parents=True)
    chown_tree(volume, IMAGE_UID)
    image = cpu_root.with_binds(Bind(volume))

    wait_all({s.name: start(image, s) for s in plan.partition}, layout.log_dir)
    partition = c.partition_dir(data_dir, c.partition_key(spec))
    assert (partition / c.SUCCESS_MARKER).exists(), sorted(p.name for p in partition.iterdir())

    wait_all({s.name: start(image, s) for s in plan.workload}, layout.log_dir)
    result = c.Result.model_validate_json((layout.run_dir / c.RESULT_FILE).read_text())
    assert (result.job_uid, result.epochs) == (uid, 1), result
    owners = {p.stat().st_uid for p in layout.run_dir.iterdir()}
    assert owners == {IMAGE_UID}, f"files written by uids {owners}"
