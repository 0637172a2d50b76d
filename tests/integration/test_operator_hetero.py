"""A heterogeneous job (syntheticMag) through the operator's lifecycle against the real control
plane, in worker mode and in server-client mode: the typed spec in the config the partition Job
and the trainers mount, the partition Job, the trainers' StatefulSet and the samplers' (none in
worker mode), progress and the printer columns, trainers exiting 0, Succeeded.

As in the homogeneous tests, kwok plays the kubelet and no trainer runs here (the local and
e2e tiers run them). The partition step does run, as a real process on the partition Job's
own environment and the config the operator wrote: its typed store is checked, and its
figures, as the pod's termination message, reach the claim and the operator's metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from distgnn_api import contract
from distgnn_api.contract import PartitionFigures, partition_key
from distgnn_api.spec import Progress
from distgnn_operator import naming
from distgnn_operator.local.ports import free_ports
from distgnn_operator.reconcile.kube_api import JOB, PVC, STATEFULSET
from distgnn_workload.partition import HeteroPartitionStore
from tests.integration.served_job import served_job
from tests.operator.harness import env_of, lifecycle_manifest, progress_server, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.partition_step import run_partition_step

pytestmark = pytest.mark.integration

EDGE_FANOUTS = {"field_of_study__rev_has_topic__paper": [5, 3]}


def _hetero_manifest(name: str, port: int, samplers: int) -> dict[str, Any]:
    return lifecycle_manifest(
        name,
        port,
        samplers,
        dataset={
            "syntheticMag": {"scale": 0.01, "seed": 3},
            "hetero": {"targetNodeType": "paper", "addReverseEdges": True},
        },
        model={
            "arch": "rsage",
            "hiddenChannels": 64,
            "numLayers": 2,
            "fanout": [10, 5],
            "edgeFanouts": EDGE_FANOUTS,
            "embeddingDim": 32,
        },
    )


@pytest.mark.parametrize("samplers", [0, 2], ids=["worker", "server-client"])
def test_hetero_job_lifecycle(
    control_plane: ControlPlane, namespace: str, crd: None, tmp_path: Path, samplers: int
) -> None:
    (port,) = free_ports(1, host="0.0.0.0")
    with served_job(control_plane, namespace, _hetero_manifest("mag", port, samplers)) as cluster:
        # The partition Job mounts the config, which holds the typed spec as admitted.
        part = wait_for("the partition Job", lambda: cluster.get(JOB, "mag-partition"))
        assert env_of(part)[contract.ENV_ROLE] == "partition"
        config = cluster.job_config("mag")
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
        store, figures = run_partition_step(env_of(part), cluster.job_config_json("mag"), tmp_path)
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
        assert cluster.job_config("mag") == config

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
