"""A link-prediction job (syntheticLink) through the operator's lifecycle against the real
control plane, in worker mode and in server-client mode: the link spec in the config the pods
mount, the real partition step writing the edge split, the trainers' and samplers'
StatefulSets, the MRR in the progress and the printer columns, trainers exiting 0, Succeeded.

As in the other operator tests, kwok plays the kubelet and no trainer runs here (the e2e tier
runs them); the partition step runs as a real process on the Job's own environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distgnn_api import contract
from distgnn_api.spec import Progress
from distgnn_operator.local.ports import free_ports
from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET
from distgnn_workload.partition.link_split import link_meta, read_link_split
from tests.integration.served_job import served_job
from tests.operator.harness import env_of, lifecycle_manifest, progress_server, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.partition_step import run_partition_step

pytestmark = pytest.mark.integration


def _link_manifest(name: str, port: int, samplers: int) -> dict[str, Any]:
    return lifecycle_manifest(
        name,
        port,
        samplers,
        dataset={"syntheticLink": {"scale": 0.001, "seed": 4}},
        model={"arch": "sage", "hiddenChannels": 64, "numLayers": 2, "fanout": [10, 5]},
        task="linkPrediction",
        linkPrediction={
            "split": {"valid": 0.1, "test": 0.1},
            "negatives": {"perPositive": 2, "kind": "corruptDestination"},
            "evaluation": {"negatives": 20, "hitsAt": [1, 10]},
            "decoder": "mlp",
        },
    )


@pytest.mark.parametrize("samplers", [0, 1], ids=["worker", "server-client"])
def test_link_job_lifecycle(
    control_plane: ControlPlane, namespace: str, crd: None, tmp_path: Path, samplers: int
) -> None:
    (port,) = free_ports(1, host="0.0.0.0")
    with served_job(control_plane, namespace, _link_manifest("cites", port, samplers)) as cluster:
        part = wait_for("the partition Job", lambda: cluster.get(JOB, "cites-partition"))
        config = cluster.job_config("cites")
        spec = config.spec
        assert spec.is_link_prediction
        link = spec.link_prediction
        assert link is not None
        assert (link.negatives.per_positive, link.decoder.value) == (2, "mlp")
        assert link.evaluation.negatives == 20

        # The real partition step writes the edge split once, with its fixed negatives.
        store, figures = run_partition_step(
            env_of(part), cluster.job_config_json("cites"), tmp_path
        )
        meta = link_meta(store)
        test = read_link_split(store, "test")
        assert meta["num_test"] == len(test) > 0
        assert test.dst_neg is not None
        assert tuple(test.dst_neg.shape) == (len(test), 20)
        cluster.finish_partition_pod("cites", figures.model_dump_json(by_alias=True))

        status = cluster.wait_phase("cites", "Training")
        assert status["partition"]["key"] == config.partition_key
        trainers = cluster.running_pods("cites", "trainer", 2)
        if samplers:
            cluster.running_pods("cites", "sampler", samplers)
        else:
            assert cluster.get(STATEFULSET, "cites-sampler") is None
        env = env_of(cluster.get(STATEFULSET, "cites-trainer") or {})
        assert env[contract.ENV_NUM_SAMPLERS] == str(samplers)
        assert cluster.job_config("cites") == config

        # The ranking figures reach the status and the printer columns.
        progress = Progress(
            epoch=10,
            epochs=10,
            seeds_per_second=2000.0,
            loss=0.4,
            val_mrr=0.4321,
            test_mrr=0.4123,
            test_hits={"1": 0.25, "10": 0.75},
        )
        with progress_server(trainers[0]["status"]["podIP"], port, progress):
            wait_for(
                "the test MRR in the status",
                lambda: cluster.status("cites").get("progress", {}).get("testMrr") == 0.4123,
            )
        assert cluster.status("cites")["progress"]["testHits"] == {"1": 0.25, "10": 0.75}
        lines = control_plane.kubectl("get", "dgj", "cites", "-n", namespace).stdout.split("\n")
        header = lines[0].split()
        assert header[-3:] == ["TEST", "MRR", "AGE"]
        assert lines[1].split()[:6] == ["cites", "Training", "2", "10", "2000", "0.4123"]
        wide = control_plane.kubectl("get", "dgj", "cites", "-n", namespace, "-o", "wide")
        assert "0.4321" in wide.stdout

        cluster.exit_pods(trainers, 0)
        cluster.wait_phase("cites", "Succeeded")
        cluster.wait_replicas("cites-trainer", 0)
