"""A heterogeneous job (syntheticMag) through the operator's lifecycle against the real control
plane, in worker mode and in server-client mode: the typed spec in the config the partition Job
and the trainers mount, the partition Job, the trainers' StatefulSet and the samplers' (none in
worker mode), progress and the printer columns, trainers exiting 0, Succeeded.

As in the homogeneous tests, kwok plays the kubelet and no trainer runs here (the local and
e2e tiers run them). The partition step does run, as a real process on the partition Job's
own environment and the config the operator wrote: its typed store is checked, and its
figures, as the pod's termination message, reach the claim and the operator's metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from distgnn_api import contract
from distgnn_api.contract import (
    CONFIG_FILE_NAME,
    JobConfig,
    PartitionFigures,
    Role,
    partition_dir,
    partition_key,
    role_module,
)
from distgnn_api.spec import Progress
from distgnn_operator import naming
from distgnn_operator.local.ports import free_ports
from distgnn_operator.reconcile.kube_api import CONFIG_MAP, JOB, PVC, STATEFULSET
from distgnn_workload.partition import HeteroPartitionStore
from tests.operator.harness import (
    Cluster,
    env_of,
    install_crd,
    job_manifest,
    progress_server,
    run_operator,
    wait_for,
)
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

EDGE_FANOUTS = {"field_of_study__rev_has_topic__paper": [5, 3]}


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    install_crd(control_plane)


def _hetero_manifest(name: str, port: int, samplers: int) -> dict[str, Any]:
    manifest = job_manifest(
        name,
        samplers={"replicas": samplers, "gpusPerPod": 0},
        trainers={"replicas": 2, "gpusPerPod": 1},
        partition={"algorithm": "metis", "numPartitions": 2},
        model={
            "arch": "rsage",
            "hiddenChannels": 64,
            "numLayers": 2,
            "fanout": [10, 5],
            "edgeFanouts": EDGE_FANOUTS,
            "embeddingDim": 32,
        },
        training={"epochs": 10, "batchSize": 512},
        metricsPort=port,
    )
    manifest["spec"]["dataset"] = {
        "syntheticMag": {"scale": 0.01, "seed": 3},
        "hetero": {"targetNodeType": "paper", "addReverseEdges": True},
    }
    return manifest


def _config(cluster: Cluster, name: str) -> JobConfig:
    cm = cluster.get(CONFIG_MAP, f"{name}-config")
    assert cm is not None
    return JobConfig.model_validate_json(cm["data"][CONFIG_FILE_NAME])


def _partition(part: dict[str, Any], config: str, tmp: Path) -> tuple[Path, PartitionFigures]:
    """The partition step as a real process, on the Job's env with local paths: the store's
    folder and the figures it leaves as its termination message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    env.update({k: v for k, v in env_of(part).items() if isinstance(v, str)})
    job = JobConfig.model_validate_json(config)
    data, log = tmp / "data", tmp / "termination-log"
    (tmp / CONFIG_FILE_NAME).write_text(config)
    env.update(
        {
            contract.ENV_DATA_DIR: str(data),
            contract.ENV_PARTITION_DIR: str(partition_dir(data, job.partition_key)),
            contract.ENV_RUN_DIR: str(contract.run_dir(data, job.uid)),
            contract.ENV_CONFIG: str(tmp / CONFIG_FILE_NAME),
            contract.ENV_TERMINATION_LOG: str(log),
            contract.ENV_METRICS_PORT: "0",
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", role_module(Role.partitioner)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return partition_dir(data, job.partition_key), PartitionFigures.model_validate_json(
        log.read_text()
    )


@pytest.mark.parametrize("samplers", [0, 2], ids=["worker", "server-client"])
def test_hetero_job_lifecycle(
    control_plane: ControlPlane, namespace: str, crd: None, tmp_path: Path, samplers: int
) -> None:
    cluster = Cluster(control_plane, namespace)
    cluster.volume_for_created_claim("mag")
    (port,) = free_ports(1, host="0.0.0.0")
    with run_operator(control_plane, namespace):
        cluster.apply(_hetero_manifest("mag", port, samplers))

        # The partition Job mounts the config, which holds the typed spec as admitted.
        part = wait_for("the partition Job", lambda: cluster.get(JOB, "mag-partition"))
        assert env_of(part)[contract.ENV_ROLE] == "partition"
        config = _config(cluster, "mag")
        spec = config.spec
        assert spec.dataset.synthetic_mag is not None
        assert (spec.dataset.synthetic_mag.scale, spec.dataset.synthetic_mag.seed) == (0.01, 3)
        hetero = spec.dataset.hetero_section
        assert hetero is not None
        assert (hetero.target_node_type, hetero.add_reverse_edges) == ("paper", True)
        assert spec.model.arch.value == "rsage"
        assert spec.model.edge_fanouts == EDGE_FANOUTS
        assert spec.model.embedding_size == 32
        assert spec.worker_mode is (samplers == 0)
        assert config.partition_key == partition_key(spec)

        # The real partition step on that config writes a typed store and leaves its figures
        # for the operator, as the kubelet would from its termination message.
        cm = cluster.get(CONFIG_MAP, "mag-config") or {}
        store, figures = _partition(part, cm["data"][CONFIG_FILE_NAME], tmp_path)
        meta = HeteroPartitionStore.open(store).meta
        assert (meta.key, meta.target_node_type) == (config.partition_key, "paper")
        assert set(meta.node_types) == {"paper", "author", "institution", "field_of_study"}
        assert set(EDGE_FANOUTS) <= set(meta.edge_types)
        assert (figures.num_partitions, figures.algorithm) == (2, "metis")
        assert figures.edge_cut > 0
        cluster.finish_partition_pod("mag", figures.model_dump_json(by_alias=True))

        # Training: kwok completes the partition pod; worker mode builds no sampler StatefulSet.
        status = cluster.wait_phase("mag", "Training")
        assert status["partition"]["numPartitions"] == 2
        assert status["partition"]["key"] == config.partition_key
        assert status["partition"]["reused"] is False
        # The figures of the real partition, kept on the claim and exported by the operator.
        annotation = naming.partition_figures_annotation(config.partition_key)
        kept = wait_for(
            "the partition figures on the claim",
            lambda: ((cluster.get(PVC, "mag-data") or {})["metadata"].get("annotations") or {}).get(
                annotation
            ),
        )
        assert PartitionFigures.model_validate_json(kept) == figures
        wait_for(
            "the edge cut among the operator's metrics",
            lambda: (
                REGISTRY.get_sample_value(
                    "distgnn_partition_edge_cut", {"namespace": namespace, "job": "mag"}
                )
                == figures.edge_cut
            ),
        )
        trainers = cluster.running_pods("mag", "trainer", 2)
        if samplers:
            cluster.running_pods("mag", "sampler", samplers)
            sampler_env = env_of(cluster.wait_get(STATEFULSET, "mag-sampler"))
            assert sampler_env[contract.ENV_ROLE] == "sampler"
        else:
            assert cluster.get(STATEFULSET, "mag-sampler") is None
            assert cluster.pods("mag", "sampler") == []
        env = env_of(cluster.get(STATEFULSET, "mag-trainer") or {})
        assert env[contract.ENV_ROLE] == "trainer"
        assert env[contract.ENV_NUM_SAMPLERS] == str(samplers)
        assert env[contract.ENV_NUM_TRAINERS] == "2"
        # The trainers mount the same config: one typed spec for every pod of the job.
        assert _config(cluster, "mag") == config

        # Progress from trainer 0 and the printer columns, as for a homogeneous job.
        progress = Progress(epoch=4, epochs=10, seeds_per_second=1234.5, loss=2.5)
        with progress_server(trainers[0]["status"]["podIP"], port, progress):
            wait_for(
                "progress in the status",
                lambda: cluster.status("mag").get("progress", {}).get("epoch") == 4,
            )
        lines = control_plane.kubectl("get", "dgj", "mag", "-n", namespace).stdout.split("\n")
        assert lines[0].split() == [
            "NAME",
            "PHASE",
            "PARTITIONS",
            "EPOCH",
            "SEEDS/S",
            "TEST",
            "MRR",
            "AGE",
        ]
        assert lines[1].split()[:5] == ["mag", "Training", "2", "4", "1234.5"]

        cluster.exit_pods(trainers, 0)
        status = cluster.wait_phase("mag", "Succeeded")
        cluster.wait_replicas("mag-trainer", 0)
        if samplers:
            cluster.wait_replicas("mag-sampler", 0)

    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Partitioned"]["reason"] == "PartitionJobSucceeded"
    assert conditions["Succeeded"]["reason"] == "TrainersSucceeded"
    claim = cluster.get(PVC, "mag-data")
    assert claim is not None
    assert claim["metadata"]["annotations"][f"partitions.distgnn.io/{config.partition_key}"] == (
        "complete"
    )
    row = control_plane.kubectl("get", "dgj", "mag", "-n", namespace, "--no-headers").stdout
    assert row.split()[:3] == ["mag", "Succeeded", "2"]
