"""Two operator replicas (``python -m distgnn_operator`` processes) in one kopf peering: the
higher-priority one works, the other waits, and takes over when the first stops. The job
finishes with no duplicated children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET
from tests.operator.harness import (
    REPO,
    Cluster,
    install_crd,
    job_manifest,
    wait_for,
    wait_for_watch_cache,
)
from tests.support.controlplane import ControlPlane
from tests.support.process_group import process_group

pytestmark = pytest.mark.integration

PEERING_CRDS = REPO / "charts" / "distgnn" / "crds" / "kopf.dev_peerings.yaml"


@contextmanager
def replica(
    plane: ControlPlane, namespace: str, name: str, priority: int, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "KUBECONFIG": str(plane.kubeconfig),
        "DISTGNN_OPERATOR_KUBECONFIG": str(plane.kubeconfig),
        "DISTGNN_OPERATOR_NAMESPACES": namespace,
        "DISTGNN_OPERATOR_PEERING": "distgnn",
        "DISTGNN_OPERATOR_PEERING_PRIORITY": str(priority),
        "DISTGNN_OPERATOR_POD_NAME": name,
        "DISTGNN_OPERATOR_METRICS_PORT": "0",
        "DISTGNN_OPERATOR_HEALTH_PORT": "0",
        "DISTGNN_OPERATOR_PROGRESS_POLL_INTERVAL": "1",
    }
    with process_group([sys.executable, "-m", "distgnn_operator"], env, log, grace=30) as proc:
        yield proc


def peers(plane: ControlPlane, namespace: str) -> set[str]:
    out = plane.kubectl("get", "kopfpeering", "distgnn", "-n", namespace, "-o", "json", check=False)
    if out.returncode != 0:
        return set()
    return set((json.loads(out.stdout).get("status") or {}).keys())


def test_standby_replica_takes_over(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    install_crd(control_plane)
    control_plane.kubectl("apply", "--server-side", "-f", str(PEERING_CRDS))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/kopfpeerings.kopf.dev"
    )
    wait_for_watch_cache(control_plane, "/apis/kopf.dev/v1/kopfpeerings")
    control_plane.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "distgnn"}}
        ),
    )
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("ha")
    with replica(control_plane, namespace, "replica-b", 0, tmp_path / "b.log") as standby:
        with replica(control_plane, namespace, "replica-a", 100, tmp_path / "a.log") as active:
            wait_for(
                "both replicas in the peering", lambda: len(peers(control_plane, namespace)) == 2
            )
            cluster.apply(job_manifest("ha"))
            cluster.wait_phase("ha", "Training")
            trainers = cluster.running_pods("ha", "trainer", 2)
            stopped_at = datetime.now()
            active.terminate()
            active.wait(timeout=30)
        assert standby.poll() is None
        wait_for(
            "the stopped replica to leave the peering",
            lambda: len(peers(control_plane, namespace)) == 1,
        )
        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("ha", "Succeeded", timeout=90)
        cluster.wait_replicas("ha-trainer", 0)
    assert len(cluster.owned(STATEFULSET, "ha")) == 2
    assert len(cluster.owned(JOB, "ha")) == 1
    a_log = (tmp_path / "a.log").read_text()
    b_log = (tmp_path / "b.log").read_text()
    assert "Traceback" not in a_log, a_log[-3000:]
    assert "Traceback" not in b_log, b_log[-3000:]
    # The standby was paused while the active replica lived (it either paused when that one
    # appeared or started paused, as kopf does when the peering already has a live
    # higher-priority peer), and resumed only once it had gone.
    resumed = [
        datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
        for line in b_log.splitlines()
        if "Resuming operations after the pause" in line
    ]
    assert any(t >= stopped_at for t in resumed), b_log[-3000:]
