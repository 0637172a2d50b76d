"""Invalid DistGNNJobs are rejected by the API server at `kubectl apply` (OpenAPI bounds, enums,
patterns and the CEL rules of the generated CRD), each with a message naming the field, and
nothing is created for them, even with the operator running."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from distgnn_operator.reconcile.kube_api import CONFIG_MAP, JOB, PVC, STATEFULSET
from tests.operator.harness import Cluster, install_crd, run_operator
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

BASE: dict[str, Any] = {
    "apiVersion": "distgnn.io/v1alpha1",
    "kind": "DistGNNJob",
    "metadata": {"name": "bad"},
    "spec": {"dataset": {"synthetic": {"numNodes": 1000, "numEdges": 4000}}},
}


MAG: dict[str, Any] = {"syntheticMag": {"scale": 0.01}}
RSAGE: dict[str, Any] = {"arch": "rsage", "numLayers": 2, "fanout": [5, 5]}


def with_spec(**fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"].update(fields)
    return doc


def long_name() -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["metadata"]["name"] = "a" * 45
    return doc


def no_dataset() -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["spec"] = {"trainers": {"replicas": 2}}
    return doc


# (id, manifest, the field the message must name, a phrase of the message)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "negative-sampler-replicas",
        with_spec(samplers={"replicas": -1}),
        "spec.samplers.replicas",
        "greater than or equal to 0",
    ),
    (
        "zero-trainers",
        with_spec(trainers={"replicas": 0}),
        "spec.trainers.replicas",
        "greater than or equal to 1",
    ),
    (
        "fanout-vs-layers",
        with_spec(model={"numLayers": 2}),
        "spec.model.fanout",
        "one entry per layer",
    ),
    (
        "unknown-arch",
        with_spec(model={"arch": "transformer"}),
        "spec.model.arch",
        "Unsupported value",
    ),
    (
        "zero-batch-size",
        with_spec(training={"batchSize": 0}),
        "spec.training.batchSize",
        "greater than or equal to 1",
    ),
    ("no-dataset", no_dataset(), "spec.dataset", "Required value"),
    (
        "bad-quantity",
        with_spec(trainers={"resources": {"requests": {"memory": "lots"}}}),
        "spec.trainers.resources.requests.memory",
        "should match",
    ),
    (
        "zero-partitions",
        with_spec(partition={"numPartitions": 0}),
        "spec.partition.numPartitions",
        "greater than or equal to 1",
    ),
    (
        "two-datasets",
        with_spec(dataset={"synthetic": {}, "pyg": {"path": "graphs/g.pt"}}),
        "spec.dataset.synthetic",
        "exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg",
    ),
    (
        "empty-dataset",
        with_spec(dataset={}),
        "spec.dataset.synthetic",
        "exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg",
    ),
    (
        "partitions-not-multiple",
        with_spec(partition={"numPartitions": 3}),
        "spec.partition.numPartitions",
        "multiple of samplers.replicas",
    ),
    (
        "bf16-on-cpu",
        with_spec(training={"bf16": True}, trainers={"gpusPerPod": 0}),
        "spec.training.bf16",
        "bf16 autocast needs GPUs",
    ),
    (
        "gat-heads",
        with_spec(model={"arch": "gat", "hiddenChannels": 250, "heads": 4}),
        "spec.model.heads",
        "divisible by heads",
    ),
    (
        "claim-and-class",
        with_spec(storage={"claimName": "data", "storageClassName": "fast"}),
        "spec.storage.storageClassName",
        "applies to a created claim only",
    ),
    (
        "no-test-split",
        with_spec(dataset={"synthetic": {"trainFraction": 0.9, "valFraction": 0.1}}),
        "spec.dataset.synthetic.trainFraction",
        "leave a test split",
    ),
    (
        "unknown-field",
        with_spec(trainers={"gpus": 2}),
        "spec.trainers.gpus",
        "unknown field",
    ),
    ("dropout-one", with_spec(model={"dropout": 1.0}), "spec.model.dropout", "less than 1"),
    (
        "zero-learning-rate",
        with_spec(training={"learningRate": 0}),
        "spec.training.learningRate",
        "greater than 0",
    ),
    (
        "privileged-metrics-port",
        with_spec(metricsPort=80),
        "spec.metricsPort",
        "greater than or equal to 1024",
    ),
    (
        "negative-backoff",
        with_spec(runPolicy={"backoffLimit": -1}),
        "spec.runPolicy.backoffLimit",
        "greater than or equal to 0",
    ),
    (
        "bad-clean-pod-policy",
        with_spec(runPolicy={"cleanPodPolicy": "Some"}),
        "spec.runPolicy.cleanPodPolicy",
        "Unsupported value",
    ),
    ("name-too-long", long_name(), "metadata.name", "at most 44 characters"),
    (
        "absolute-ogb-path",
        with_spec(dataset={"ogb": {"path": "/etc/passwd"}}),
        "spec.dataset.ogb.path",
        "should match",
    ),
    (
        "zero-fanout",
        with_spec(model={"fanout": [0, 10, 5]}),
        "spec.model.fanout[0]",
        "greater than or equal to 1",
    ),
    (
        "bad-access-mode",
        with_spec(storage={"accessModes": ["ReadOnlyMany"]}),
        "spec.storage.accessModes[0]",
        "Unsupported value",
    ),
    (
        "cache-ratio-above-one",
        with_spec(samplers={"cacheRatio": 1.5}),
        "spec.samplers.cacheRatio",
        "less than or equal to 1",
    ),
    ("bad-storage-size", with_spec(storage={"size": "10 Gi"}), "spec.storage.size", "should match"),
    (
        "too-many-gpus",
        with_spec(trainers={"gpusPerPod": 17}),
        "spec.trainers.gpusPerPod",
        "less than or equal to 16",
    ),
    (
        "bad-toleration-operator",
        with_spec(scheduling={"tolerations": [{"key": "k", "operator": "Maybe"}]}),
        "spec.scheduling.tolerations[0].operator",
        "Unsupported value",
    ),
    (
        "replicas-not-a-number",
        with_spec(trainers={"replicas": "two"}),
        "spec.trainers.replicas",
        "integer",
    ),
    (
        "relational-arch-on-a-homogeneous-graph",
        with_spec(model={"arch": "rgcn"}),
        "spec.model.arch",
        "rsage and rgcn are relational",
    ),
    (
        "homogeneous-arch-on-a-typed-graph",
        with_spec(dataset=MAG),
        "spec.model.arch",
        "set model.arch to rsage",
    ),
    (
        "fanout-for-an-edge-type-mag-lacks",
        with_spec(dataset=MAG, model={**RSAGE, "edgeFanouts": {"author__cites__paper": [5, 5]}}),
        "spec.model.edgeFanouts",
        "syntheticMag does not have",
    ),
    (
        "edge-fanout-of-the-wrong-length",
        with_spec(dataset=MAG, model={**RSAGE, "edgeFanouts": {"author__writes__paper": [5]}}),
        "spec.model.edgeFanouts",
        "exactly one entry per layer",
    ),
    (
        "malformed-edge-fanout-key",
        with_spec(dataset=MAG, model={**RSAGE, "edgeFanouts": {"author_writes_paper": [5, 5]}}),
        "spec.model.edgeFanouts",
        "src__rel__dst",
    ),
    (
        "target-type-without-labels",
        with_spec(dataset={**MAG, "hetero": {"targetNodeType": "author"}}, model=RSAGE),
        "spec.dataset.hetero.targetNodeType",
        "labels on paper only",
    ),
]


@pytest.fixture(scope="module")
def served(control_plane: ControlPlane) -> Iterator[tuple[Cluster, str]]:
    """One namespace with the CRD installed and the operator watching it."""
    install_crd(control_plane)
    namespace = control_plane.create_namespace("invalid-manifests")
    try:
        with run_operator(control_plane, namespace):
            yield Cluster(control_plane, namespace), namespace
    finally:
        control_plane.delete_namespace(namespace)


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len(CASES) >= 20
    assert len({json.dumps(m, sort_keys=True) for _, m, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("manifest", "field", "phrase"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rejected_at_apply(
    control_plane: ControlPlane,
    served: tuple[Cluster, str],
    manifest: dict[str, Any],
    field: str,
    phrase: str,
) -> None:
    cluster, namespace = served
    result = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False
    )
    assert result.returncode != 0, f"accepted: {result.stdout}"
    assert field in result.stderr, result.stderr
    assert phrase in result.stderr, result.stderr
    name = manifest["metadata"]["name"]
    assert cluster.job(name) is None
    listed = control_plane.kubectl("get", "dgj", "-n", namespace, "-o", "name").stdout.strip()
    assert listed == ""


def test_nothing_was_created(control_plane: ControlPlane, served: tuple[Cluster, str]) -> None:
    cluster, namespace = served
    for case_id, manifest, _, _ in CASES:
        control_plane.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False
        )
        name = manifest["metadata"]["name"]
        for kind in (CONFIG_MAP, PVC, JOB, STATEFULSET):
            assert cluster.owned(kind, name) == [], f"{case_id}: a {kind.kind} exists"
    assert control_plane.kubectl("get", "dgj", "-n", namespace, "-o", "name").stdout.strip() == ""


def test_immutable_fields_cannot_change(
    control_plane: ControlPlane, served: tuple[Cluster, str]
) -> None:
    cluster, namespace = served
    doc = copy.deepcopy(BASE)
    doc["metadata"]["name"] = "frozen"
    doc["spec"]["runPolicy"] = {"suspend": True}
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    try:
        changed = copy.deepcopy(doc)
        changed["spec"]["dataset"]["synthetic"]["numNodes"] = 5000
        result = control_plane.kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps(changed), check=False
        )
        assert result.returncode != 0
        assert "spec.dataset" in result.stderr
        assert "dataset is immutable" in result.stderr
        # runPolicy stays mutable (suspend/resume, deadlines).
        resumed = copy.deepcopy(doc)
        resumed["spec"]["runPolicy"] = {"suspend": True, "backoffLimit": 7}
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(resumed))
        job = cluster.job("frozen")
        assert job is not None
        assert job["spec"]["runPolicy"]["backoffLimit"] == 7
        assert job["spec"]["dataset"]["synthetic"]["numNodes"] == 1000
    finally:
        control_plane.kubectl(
            "delete", "dgj", "frozen", "-n", namespace, "--wait=true", "--timeout=60s"
        )
