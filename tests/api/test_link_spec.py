"""Link-prediction jobs in the spec: valid jobs parse with their defaults, each admission
rule's Python side names its field, node-classification jobs serialise as before, and the
partition key follows what the store's split depends on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distgnn_api.contract import partition_key
from distgnn_api.link import (
    ALL_NEGATIVES_MAX_NODES,
    CITATION2_EDGES,
    CITATION2_NODES,
    Decoder,
    NegativeKind,
    Task,
    check_all_negatives,
)
from distgnn_api.spec import SpecError, parse_spec

LINK: dict[str, Any] = {"syntheticLink": {"scale": 0.001}}
MAG: dict[str, Any] = {"syntheticMag": {"scale": 0.01}}
OGB_FILES: dict[str, Any] = {
    "ogb": {"path": "datasets/mag"},
    "hetero": {"nodeTypes": ["paper", "author"], "edgeTypes": ["author__writes__paper"]},
}


def _job(
    lp: dict[str, Any] | None = None, dataset: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"dataset": dataset or LINK, "task": "linkPrediction", **extra}
    if lp is not None:
        spec["linkPrediction"] = lp
    return spec


def _hetero(lp: dict[str, Any], dataset: dict[str, Any] = MAG) -> dict[str, Any]:
    return _job(lp, dataset, model={"arch": "rsage"})


def _paths(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    return [path for path, _ in info.value.errors]


def test_a_minimal_link_job_has_the_documented_defaults() -> None:
    spec = parse_spec(_job({}))
    assert spec.task is Task.link_prediction
    assert spec.is_link_prediction
    lp = spec.link_prediction
    assert lp is not None
    assert (lp.split.valid_fraction, lp.split.test_fraction, lp.split.from_dataset) == (
        0.05,
        0.05,
        False,
    )
    assert lp.exclude_reverse
    assert lp.edge_type is None
    assert lp.reverse_edge_type is None
    assert (lp.negatives.per_positive, lp.negatives.kind) == (1, NegativeKind.uniform)
    assert lp.evaluation.negatives == 1000
    assert lp.evaluation.hits_at == [10, 50, 100]
    assert lp.decoder is Decoder.dot
    generator = spec.dataset.synthetic_link
    assert generator is not None
    assert generator.num_nodes == round(CITATION2_NODES * 0.001)
    assert generator.num_edges == round(CITATION2_EDGES * 0.001)


def test_full_scale_generator_is_citation2_sized() -> None:
    spec = parse_spec(_job({}, {"syntheticLink": {}}))
    g = spec.dataset.synthetic_link
    assert g is not None
    assert (g.num_nodes, g.num_edges, g.num_features) == (2_927_963, 30_561_187, 128)


def test_node_classification_jobs_serialise_without_the_new_fields() -> None:
    spec = parse_spec({"dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}}})
    dumped = spec.model_dump(mode="json", by_alias=True)
    assert "task" not in dumped
    assert "linkPrediction" not in dumped
    assert spec.task is Task.node_classification
    assert not spec.is_link_prediction
    link = parse_spec(_job({"decoder": "mlp"})).model_dump(mode="json", by_alias=True)
    assert link["task"] == "linkPrediction"
    assert link["linkPrediction"]["decoder"] == "mlp"


MISTAKES: list[tuple[dict[str, Any], str]] = [
    (_job(None), "spec.linkPrediction"),
    ({"dataset": {"synthetic": {}}, "linkPrediction": {}}, "spec.linkPrediction"),
    ({"dataset": LINK}, "spec.task"),
    (_job({}, task="edgeRegression"), "spec.task"),
    (_job({"split": {"valid": 0.0}}), "spec.linkPrediction.split.valid"),
    (_job({"split": {"test": 1.0}}), "spec.linkPrediction.split.test"),
    (_job({"split": {"valid": 0.5, "test": 0.5}}), "spec.linkPrediction.split.valid"),
    (_job({"split": {"valid": 0.97}}), "spec.linkPrediction.split.valid"),
    (
        _job({"split": {"fromDataset": True, "valid": 0.1}}, {"ogb": {"path": "d"}}),
        "spec.linkPrediction.split.fromDataset",
    ),
    (_job({"split": {"fromDataset": True}}), "spec.linkPrediction.split.fromDataset"),
    (
        _job({"split": {"fromDataset": True}}, {"pyg": {"path": "g.pt"}}),
        "spec.linkPrediction.split.fromDataset",
    ),
    (_job({"negatives": {"perPositive": 0}}), "spec.linkPrediction.negatives.perPositive"),
    (_job({"negatives": {"kind": "hard"}}), "spec.linkPrediction.negatives.kind"),
    (_job({"evaluation": {"hitsAt": []}}), "spec.linkPrediction.evaluation.hitsAt"),
    (_job({"evaluation": {"hitsAt": [0]}}), "spec.linkPrediction.evaluation.hitsAt"),
    (_job({"evaluation": {"hitsAt": [10, 10]}}), "spec.linkPrediction.evaluation.hitsAt"),
    (
        _job({"evaluation": {"negatives": 20, "hitsAt": [10, 50]}}),
        "spec.linkPrediction.evaluation.hitsAt",
    ),
    (_job({"evaluation": {"negatives": 0}}), "spec.linkPrediction.evaluation.negatives"),
    (_job({"evaluation": {"negatives": "some"}}), "spec.linkPrediction.evaluation.negatives"),
    (
        _job({"evaluation": {"negatives": "all"}}, {"syntheticLink": {"scale": 0.1}}),
        "spec.linkPrediction.evaluation.negatives",
    ),
    (
        _job({"evaluation": {"negatives": "all"}}, {"synthetic": {}}),
        "spec.linkPrediction.evaluation.negatives",
    ),
    (
        _hetero(
            {"evaluation": {"negatives": "all"}, "edgeType": "author__writes__paper"},
            {"syntheticMag": {"scale": 0.1}},
        ),
        "spec.linkPrediction.evaluation.negatives",
    ),
    (_job({"evaluation": {"maxPositives": 0}}), "spec.linkPrediction.evaluation.maxPositives"),
    (_job({"decoder": "bilinear"}), "spec.linkPrediction.decoder"),
    (_job({"positivesPerEpoch": 0}), "spec.linkPrediction.positivesPerEpoch"),
    (_job({"positivesPerEpoch": "half"}), "spec.linkPrediction.positivesPerEpoch"),
    (_job({"excludeReverse": False}), "spec.linkPrediction.excludeReverse"),
    (_job({"edgeType": "paper__cites__paper"}), "spec.linkPrediction.edgeType"),
    (_hetero({}), "spec.linkPrediction.edgeType"),
    (_hetero({"edgeType": "paper__writes__author"}), "spec.linkPrediction.edgeType"),
    (_hetero({"edgeType": "not a key"}), "spec.linkPrediction.edgeType"),
    (
        _hetero({"edgeType": "author__writes__paper", "reverseEdgeType": "paper__cites__author"}),
        "spec.linkPrediction.reverseEdgeType",
    ),
    (
        _hetero({"edgeType": "author__writes__paper", "reverseEdgeType": "author__writes__paper"}),
        "spec.linkPrediction.reverseEdgeType",
    ),
    (
        _job({"reverseEdgeType": "paper__rev_cites__paper"}),
        "spec.linkPrediction.reverseEdgeType",
    ),
    (_hetero({"edgeType": "paper__cites__paper"}, OGB_FILES), "spec.linkPrediction.edgeType"),
    (
        _hetero(
            {
                "edgeType": "author__writes__paper",
                "reverseEdgeType": "field_of_study__rev_has_topic__paper",
            }
        ),
        "spec.linkPrediction.reverseEdgeType",
    ),
    (
        _hetero(
            {
                "edgeType": "author__writes__paper",
                "reverseEdgeType": "paper__rev_cites__author",
            },
            OGB_FILES,
        ),
        "spec.linkPrediction.reverseEdgeType",
    ),
    (
        _hetero({"edgeType": "author__writes__paper", "split": {"fromDataset": True}}, OGB_FILES),
        "spec.linkPrediction.split.fromDataset",
    ),
    (_job({}, {"syntheticLink": {"scale": 0.00001}}), "spec.dataset.syntheticLink.scale"),
    (_job({}, {"syntheticLink": {}, "hetero": {}}), "spec.dataset.hetero"),
    (_job({}, {"syntheticLink": {}, "synthetic": {}}), "spec.dataset.synthetic"),
]
"""Jobs that break one rule each, and the field the refusal must name."""


@pytest.mark.parametrize(("spec", "field"), MISTAKES)
def test_each_mistake_is_refused_naming_its_field(spec: dict[str, Any], field: str) -> None:
    paths = _paths(spec)
    assert any(p == field or p.startswith((field + ".", field + "[")) for p in paths), paths


VALID_JOBS: list[dict[str, Any]] = [
    _job(
        {
            "split": {"valid": 0.1, "test": 0.2},
            "negatives": {"perPositive": 5, "kind": "corruptDestination"},
        }
    ),
    _job({"split": {"fromDataset": True}}, {"ogb": {"path": "datasets/ogbl-citation2"}}),
    _job({"evaluation": {"negatives": "all", "hitsAt": [1, 3, 1000]}}),
    _job({"evaluation": {"negatives": 100, "hitsAt": [100, 1]}}),
    _hetero({"edgeType": "paper__cites__paper", "excludeReverse": False}),
    _hetero({"edgeType": "author__writes__paper"}),
    _hetero({"edgeType": "author__writes__paper", "reverseEdgeType": "paper__rev_writes__author"}),
    _hetero(
        {"edgeType": "author__writes__paper", "reverseEdgeType": "paper__rev_writes__author"},
        OGB_FILES,
    ),
    _hetero({"edgeType": "paper__cites__paper"}, {"ogb": {"path": "m"}, "hetero": {}}),
    _job({}, {"synthetic": {"numNodes": 1000, "numEdges": 4000}}),
    _job({"positivesPerEpoch": 300_000}),
]
"""Link-prediction jobs that every rule must accept."""


@pytest.mark.parametrize("spec", VALID_JOBS)
def test_valid_link_jobs_parse(spec: dict[str, Any]) -> None:
    assert parse_spec(spec).link_prediction is not None


def test_all_negatives_on_files_is_checked_by_size_at_load() -> None:
    check_all_negatives(ALL_NEGATIVES_MAX_NODES)
    with pytest.raises(ValueError, match=r"spec\.linkPrediction\.evaluation\.negatives: 'all'"):
        check_all_negatives(ALL_NEGATIVES_MAX_NODES + 1)


def test_partition_key_follows_the_split_and_not_the_training_settings() -> None:
    base = parse_spec(_job({}))
    same = parse_spec(
        _job({"negatives": {"perPositive": 4}, "decoder": "mlp", "positivesPerEpoch": 1000})
    )
    other_split = parse_spec(_job({"split": {"valid": 0.1}}))
    other_negatives = parse_spec(_job({"evaluation": {"negatives": 500}}))
    other_reverse = parse_spec(_job({"evaluation": {"maxPositives": 10}}))
    assert partition_key(base) == partition_key(same)
    keys = {partition_key(s) for s in (base, other_split, other_negatives, other_reverse)}
    assert len(keys) == 4
    node = parse_spec(
        {"dataset": LINK | {}, "task": "nodeClassification"} | {"dataset": {"synthetic": {}}}
    )
    assert partition_key(node) == partition_key(parse_spec({"dataset": {"synthetic": {}}}))
    assert json.loads(node.model_dump_json(by_alias=True)).get("task") is None


def test_a_store_drawn_by_another_generator_or_split_version_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import distgnn_api.job_config as job_config

    spec = parse_spec(_job({}))
    node = parse_spec({"dataset": {"synthetic": {}}})
    before, node_before = partition_key(spec), partition_key(node)
    monkeypatch.setattr(job_config, "SYNTHETIC_LINK_GENERATOR", 1)
    after_generator = partition_key(spec)
    monkeypatch.setattr(job_config, "LINK_SPLIT_VERSION", 1)
    after_split = partition_key(spec)
    assert len({before, after_generator, after_split}) == 3
    assert partition_key(node) == node_before  # node-classification stores keep their keys
