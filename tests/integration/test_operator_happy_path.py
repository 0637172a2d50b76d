"""The whole lifecycle against the real control plane: partition Job on the claim, then the
Service, both StatefulSets and the NetworkPolicy, progress from trainer 0, trainers exit 0,
Succeeded with the StatefulSets at zero; events, conditions and printer columns."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from distgnn_api import contract
from distgnn_api.contract import (
    CONFIG_MOUNT_DIR,
    DATA_MOUNT_PATH,
    DDP_PORT,
    RPC_PORT,
    SHM_MOUNT_PATH,
)
from distgnn_api.spec import Progress
from distgnn_operator.local.ports import free_ports
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    JOB,
    NETWORK_POLICY,
    PVC,
    SERVICE,
    STATEFULSET,
)
from tests.operator.harness import (
    Cluster,
    container_of,
    env_of,
    job_manifest,
    progress_server,
    run_operator,
    wait_for,
)
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

# Every contract variable but the partition Job's termination log, distgnn run's bind address
# and the optional settings (set by hand, never by the operator).
ALL_ENV = sorted(
    v
    for k, v in vars(contract).items()
    if k.startswith("ENV_")
    and v not in (contract.ENV_TERMINATION_LOG, contract.ENV_METRICS_ADDRESS)
    and v not in contract.SETTINGS
)


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def volumes(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in obj["spec"]["template"]["spec"]["volumes"]}


def mounts(obj: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container_of(obj)["volumeMounts"]}


def test_happy_path(control_plane: ControlPlane, namespace: str, crd: None) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("happy")
    created, succeeded = (
        counter("distgnn_operator_jobs_created_total"),
        counter("distgnn_operator_jobs_succeeded_total"),
    )
    (port,) = free_ports(1, host="0.0.0.0")
    manifest = job_manifest(
        "happy",
        trainers={"replicas": 2, "gpusPerPod": 2, "resources": {"requests": {"cpu": "2"}}},
        samplers={"replicas": 2, "resources": {"requests": {"cpu": "1"}}},
        metricsPort=port,
    )
    with run_operator(control_plane, namespace):
        cluster.apply(manifest)

        # Partitioning: the Job mounts the claim the operator created, and the config.
        part = wait_for("the partition Job", lambda: cluster.get(JOB, "happy-partition"))
        assert volumes(part)["data"]["persistentVolumeClaim"]["claimName"] == "happy-data"
        assert mounts(part) == {
            "data": DATA_MOUNT_PATH,
            "config": CONFIG_MOUNT_DIR,
            "shm": SHM_MOUNT_PATH,
        }
        assert env_of(part)[contract.ENV_ROLE] == "partition"
        claim = cluster.get(PVC, "happy-data")
        assert claim is not None
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
        assert cluster.get(CONFIG_MAP, "happy-config") is not None

        # Training: kwok completes the partition pod; the operator builds the rest.
        status = cluster.wait_phase("happy", "Training")
        assert status["partition"]["numPartitions"] == 2
        assert status["partition"]["reused"] is False
        svc = wait_for("the headless Service", lambda: cluster.get(SERVICE, "happy-peers"))
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["publishNotReadyAddresses"] is True
        netpol = wait_for(
            "the NetworkPolicy", lambda: cluster.get(NETWORK_POLICY, "happy-isolation")
        )
        internal, external = netpol["spec"]["ingress"]
        assert internal["from"] == [
            {"podSelector": {"matchLabels": {"distgnn.io/job-name": "happy"}}}
        ]
        assert external["ports"] == [{"protocol": "TCP", "port": port}]
        for role, gpus in (("sampler", None), ("trainer", "2")):
            sts = cluster.wait_get(STATEFULSET, f"happy-{role}")
            assert sts["spec"]["serviceName"] == "happy-peers"
            assert sts["spec"]["podManagementPolicy"] == "Parallel"
            assert sts["spec"]["replicas"] == 2
            c = container_of(sts)
            assert sorted(env_of(sts)) == ALL_ENV
            assert env_of(sts)[contract.ENV_RANK] == {
                "fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']",
                }
            }
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert ports["rpc"] == RPC_PORT
            assert ports["metrics"] == port
            assert ("ddp" in ports) is (role == "trainer")
            assert c["resources"].get("limits", {}).get("nvidia.com/gpu") == gpus
            assert c["resources"].get("requests", {}).get("nvidia.com/gpu") == gpus
            assert volumes(sts)["shm"]["emptyDir"]["medium"] == "Memory"
            assert mounts(sts)["data"] == DATA_MOUNT_PATH
        trainers = cluster.running_pods("happy", "trainer", 2)
        cluster.running_pods("happy", "sampler", 2)
        # The GPU pods went to the GPU nodes; each rank reads its index from its label.
        assert {p["spec"]["nodeName"] for p in trainers} <= {"kwok-gpu-0", "kwok-gpu-1"}
        assert [p["metadata"]["labels"]["apps.kubernetes.io/pod-index"] for p in trainers] == [
            "0",
            "1",
        ]
        assert env_of(cluster.get(STATEFULSET, "happy-trainer") or {})[
            contract.ENV_DDP_PORT
        ] == str(DDP_PORT)

        # Progress: trainer 0's /progress on its (loopback) pod IP.
        progress = Progress(epoch=3, epochs=10, seeds_per_second=4321.5, loss=0.75)
        with progress_server(trainers[0]["status"]["podIP"], port, progress) as requests:
            wait_for(
                "progress in the status",
                lambda: cluster.status("happy").get("progress", {}).get("epoch") == 3,
            )
            assert "/progress" in requests
        columns = control_plane.kubectl("get", "dgj", "happy", "-n", namespace).stdout.split("\n")
        header, row = columns[0].split(), columns[1].split()
        assert header == ["NAME", "PHASE", "PARTITIONS", "EPOCH", "SEEDS/S", "TEST", "MRR", "AGE"]
        assert row[:5] == ["happy", "Training", "2", "3", "4321.5"]

        # Completion: every trainer exits 0.
        cluster.exit_pods(trainers, 0)
        status = cluster.wait_phase("happy", "Succeeded")
        cluster.wait_replicas("happy-sampler", 0)
        cluster.wait_replicas("happy-trainer", 0)
        wait_for("the pods to go", lambda: not cluster.pods("happy", "trainer"))

    # The operator (in this process) counted the job.
    assert counter("distgnn_operator_jobs_created_total") == created + 1
    assert counter("distgnn_operator_jobs_succeeded_total") == succeeded + 1
    assert counter("distgnn_operator_reconcile_seconds_count") > 0
    assert (
        REGISTRY.get_sample_value(
            "distgnn_operator_jobs", {"namespace": namespace, "phase": "Succeeded"}
        )
        or 0
    ) == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    assert (conditions["Partitioned"]["status"], conditions["Partitioned"]["reason"]) == (
        "True",
        "PartitionJobSucceeded",
    )
    assert (conditions["Succeeded"]["status"], conditions["Succeeded"]["reason"]) == (
        "True",
        "TrainersSucceeded",
    )
    assert conditions["Training"]["status"] == "False"
    assert status["completionTime"] >= status["startTime"]
    assert status["progress"]["seedsPerSecond"] == 4321.5
    reasons = cluster.event_reasons("happy")
    assert {
        "PartitionJobRunning",
        "PartitionJobSucceeded",
        "TrainersRunning",
        "TrainersSucceeded",
    } <= reasons
    claim = cluster.get(PVC, "happy-data")
    assert claim is not None
    key = status["partition"]["key"]
    assert claim["metadata"]["annotations"][f"partitions.distgnn.io/{key}"] == "complete"
    assert not claim["metadata"].get("ownerReferences")  # retentionPolicy Retain
    row = control_plane.kubectl(
        "get", "dgj", "happy", "-n", namespace, "--no-headers"
    ).stdout.split()
    assert row[:3] == ["happy", "Succeeded", "2"]
