"""Spec models: defaults, bounds, cross-field rules and error messages that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from distgnn_api.spec import (
    CEL_RULES,
    Arch,
    DistGNNJobSpec,
    EvaluationKind,
    Phase,
    SpecError,
    parse_job,
    parse_spec,
)
from tests.api.test_link_spec import MISTAKES


def _spec(**overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"dataset": {"synthetic": {"numNodes": 1000, "numEdges": 5000}}}
    spec.update(overrides)
    return spec


def test_defaults_are_products_shaped() -> None:
    spec = parse_spec({"dataset": {"synthetic": {}}})
    syn = spec.dataset.synthetic
    assert syn is not None
    assert (syn.num_nodes, syn.num_edges, syn.num_features, syn.num_classes) == (
        2_449_029,
        61_859_140,
        100,
        47,
    )
    assert spec.model.arch is Arch.sage
    assert spec.model.fanout == [15, 10, 5]
    assert spec.training.batch_size == 1024


def test_camel_case_round_trip() -> None:
    spec = parse_spec(_spec(trainers={"replicas": 3, "gpusPerPod": 2}))
    dumped = spec.model_dump(mode="json", by_alias=True)
    assert dumped["trainers"]["gpusPerPod"] == 2
    assert parse_spec(dumped) == spec


@pytest.mark.parametrize(
    ("overrides", "field", "phrase"),
    [
        ({"trainers": {"replicas": -1}}, "spec.trainers.replicas", "greater than or equal to 1"),
        ({"samplers": {"replicas": -2}}, "spec.samplers.replicas", "greater than or equal to 0"),
        ({"model": {"arch": "transformer"}}, "spec.model.arch", "'gat', 'rsage' or 'rgcn'"),
        ({"model": {"fanout": [10, 5]}}, "spec.model.fanout", "one entry per layer"),
        ({"training": {"batchSize": 0}}, "spec.training.batchSize", "greater than or equal to 1"),
        (
            {"storage": {"size": "ten gigs"}},
            "spec.storage.size",
            "not a positive Kubernetes quantity",
        ),
        (
            {"partition": {"numPartitions": 0}},
            "spec.partition.numPartitions",
            "greater than or equal to 1",
        ),
        (
            {"partition": {"numPartitions": 3}},
            "spec.partition.numPartitions",
            "multiple of samplers.replicas",
        ),
        (
            {"training": {"bf16": True}, "trainers": {"gpusPerPod": 0}},
            "spec.training.bf16",
            "needs GPUs",
        ),
        (
            {"model": {"arch": "gat", "hiddenChannels": 30, "heads": 4}},
            "spec.model.heads",
            "divisible",
        ),
        (
            {"storage": {"claimName": "c", "storageClassName": "s"}},
            "spec.storage.storageClassName",
            "created claim only",
        ),
        ({"bogus": 1}, "spec.bogus", "Extra inputs are not permitted"),
        (
            {"scheduling": {"labels": {"team": "graph", "kueue.x-k8s.io/queue-name": "user"}}},
            "spec.scheduling.labels",
            "belong on the DistGNNJob's own metadata.labels",
        ),
        (
            {"scheduling": {"annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "9"}}},
            "spec.scheduling.annotations",
            "outside the job's quota",
        ),
        (
            {
                "dataset": {"syntheticMag": {"scale": 0.01}},
                "model": {"arch": "rsage"},
                "samplers": {"replicas": 0},
                "trainers": {"replicas": 2},
                "partition": {"numPartitions": 4},
            },
            "spec.partition.numPartitions",
            "one partition per holder",
        ),
    ],
)
def test_invalid_specs_name_the_field(overrides: dict[str, Any], field: str, phrase: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(**overrides))
    paths = [path for path, _ in info.value.errors]
    assert field in paths, info.value.errors
    assert phrase in str(info.value)


def test_dataset_needs_exactly_one_source() -> None:
    with pytest.raises(
        SpecError, match="exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg"
    ):
        parse_spec({"dataset": {}})
    with pytest.raises(SpecError, match="exactly one"):
        parse_spec({"dataset": {"synthetic": {}, "pyg": {"path": "g.pt"}}})


def test_missing_dataset_is_named() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec({})
    assert ("spec.dataset", "Field required") in info.value.errors


@pytest.mark.parametrize("path", ["/abs/path", "../escape", "a/../b", ""])
def test_volume_paths_must_stay_on_the_volume(path: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec({"dataset": {"ogb": {"path": path}}})
    assert info.value.errors[0][0] == "spec.dataset.ogb.path"


def test_worker_mode_and_partition_count() -> None:
    worker = parse_spec(_spec(samplers={"replicas": 0}, trainers={"replicas": 4}))
    assert worker.worker_mode
    assert worker.num_partitions == 4
    server = parse_spec(_spec(samplers={"replicas": 2}, partition={"numPartitions": 6}))
    assert not server.worker_mode
    assert server.num_partitions == 6


def test_every_cel_rule_has_a_python_twin_that_fires() -> None:
    """Each CEL rule's Python check must reject something; guards against dead twins."""
    mag = {"syntheticMag": {"scale": 0.01}}
    rsage = {"arch": "rsage", "numLayers": 2, "fanout": [5, 5]}
    bad_inputs = [
        _spec(dataset={"synthetic": {"trainFraction": 0.7, "valFraction": 0.3}}),
        {"dataset": {}},
        {"dataset": {"synthetic": {"numNodes": 1000}}},
        _spec(model={"numLayers": 2}),
        _spec(partition={"numPartitions": 5}),
        _spec(training={"bf16": True}, trainers={"gpusPerPod": 0}),
        _spec(model={"arch": "gat", "hiddenChannels": 10, "heads": 3}),
        _spec(storage={"claimName": "a", "storageClassName": "b"}),
        _spec(metricsPort=29500),
        _spec(partition={"outOfCore": "always"}),
        _spec(partition={"metisSampleEdges": 5000}),
        {
            "dataset": {"pyg": {"path": "g"}},
            "partition": {"outOfCore": "always", "algorithm": "random"},
        },
        _spec(networkPolicy={"monitoringNamespaceSelector": {}}),
        # heterogeneous datasets (tests/api/test_hetero_spec.py has one test per rule)
        {"dataset": {"syntheticMag": {"scale": 0.001, "numClasses": 1000}}, "model": rsage},
        {"dataset": {"ogb": {"path": "m"}, "hetero": {"targetNodeType": "x", "nodeTypes": ["p"]}}},
        {
            "dataset": {
                "ogb": {"path": "m"},
                "hetero": {"nodeTypes": ["p"], "edgeTypes": ["a__r__p"]},
            }
        },
        {"dataset": {**mag, "hetero": {"targetNodeType": "author"}}, "model": rsage},
        {"dataset": {**mag, "hetero": {"nodeTypes": ["paper"]}}, "model": rsage},
        {"dataset": {"synthetic": {}, "hetero": {}}},
        {"dataset": mag, "model": {**rsage, "edgeFanouts": {"paper__cites__paper": [5]}}},
        _spec(model={"arch": "rgcn"}),
        {"dataset": mag},
        {"dataset": {"pyg": {"path": "g"}, "hetero": {"edgeTypes": ["a__r__b", "b__rev_r__a"]}}},
        _spec(model={"edgeFanouts": {"a__r__b": [5, 5, 5]}}),
        _spec(model={"embeddingDim": 64}),
        {"dataset": mag, "model": {**rsage, "edgeFanouts": {"paper__writes__author": [5, 5]}}},
        {
            "dataset": {"ogb": {"path": "m"}, "hetero": {"edgeTypes": ["a__r__b"]}},
            "model": {**rsage, "edgeFanouts": {"b__r__a": [5, 5]}},
        },
        {"dataset": mag, "model": rsage, "partition": {"numPartitions": 4}},
        {
            "dataset": {"ogb": {"path": "m"}, "hetero": {"nodeTypes": ["a", "b"]}},
            "model": {**rsage, "edgeFanouts": {"a__r__c": [5, 5]}},
        },
        {
            "dataset": {"ogb": {"path": "m"}, "hetero": {"nodeTypes": ["a", "b"]}},
            "model": rsage,
            "task": "linkPrediction",
            "linkPrediction": {"edgeType": "c__r__a"},
        },
        # Kueue's keys belong on the job's own metadata
        _spec(scheduling={"labels": {"kueue.x-k8s.io/queue-name": "user"}}),
        _spec(scheduling={"annotations": {"kueue.x-k8s.io/priority-class": "high"}}),
        # link prediction (tests/api/test_link_spec.py has one case per rule)
        *(spec for spec, _ in MISTAKES),
    ]
    messages = []
    for bad in bad_inputs:
        with pytest.raises(SpecError) as info:
            parse_spec(bad)
        messages.append(str(info.value))
    for _, group in CEL_RULES:
        for rule in group:
            assert any(rule.message in m for m in messages), rule.message


def test_parse_job_document() -> None:
    job = parse_job(
        {
            "apiVersion": "distgnn.io/v1alpha1",
            "kind": "DistGNNJob",
            "metadata": {"name": "products"},
            "spec": {"dataset": {"synthetic": {}}},
        }
    )
    assert isinstance(job.spec, DistGNNJobSpec)
    with pytest.raises(SpecError) as info:
        parse_job(
            {
                "apiVersion": "distgnn.io/v1alpha1",
                "kind": "DistGNNJob",
                "metadata": {"name": "x" * 45},
                "spec": {"dataset": {"synthetic": {}}},
            }
        )
    assert info.value.errors[0][0] == "metadata.name"


def test_phases_are_the_design_lifecycle() -> None:
    assert [p.value for p in Phase] == [
        "Pending",
        "Partitioning",
        "Training",
        "Succeeded",
        "Failed",
        "Suspended",
        "Queued",
    ]


def test_evaluation_defaults_to_full_test_and_sampled_validation() -> None:
    evaluation = parse_spec(_spec()).training.evaluation
    assert (evaluation.test, evaluation.validation) == (EvaluationKind.full, EvaluationKind.sampled)
    chosen = parse_spec(_spec(training={"evaluation": {"validation": "full", "test": "sampled"}}))
    assert chosen.training.evaluation.validation is EvaluationKind.full
    assert chosen.training.evaluation.test is EvaluationKind.sampled


@pytest.mark.parametrize(
    ("evaluation", "field"),
    [
        ({"test": "exact"}, "spec.training.evaluation.test"),
        ({"validation": "fullNeighbourhood"}, "spec.training.evaluation.validation"),
        ({"train": "full"}, "spec.training.evaluation.train"),
    ],
)
def test_a_bad_evaluation_kind_is_named(evaluation: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(_spec(training={"evaluation": evaluation}))
    assert [path for path, _ in info.value.errors] == [field]
    if "train" not in evaluation:
        assert "'full' or 'sampled'" in str(info.value)
