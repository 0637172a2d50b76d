"""Heterogeneous jobs in the spec: each admission rule's Python side names its field, valid jobs
pass, homogeneous jobs serialise as before, and the load-time resolvers name the field too."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distgnn_api.contract import job_config_json, partition_key
from distgnn_api.edge_types import parse_edge_type_key
from distgnn_api.hetero import DEFAULT_EMBEDDING_DIM, SyntheticMagDataset
from distgnn_api.hetero_load import (
    HeteroMismatch,
    resolve_edge_fanouts,
)
from distgnn_api.mag_shape import (
    MAG_NODE_TYPES,
    MAG_RELATIONS,
    MAG_SPLIT,
    mag_edge_types,
    scaled_count,
)
from distgnn_api.spec import Arch, SpecError, parse_spec

MAG: dict[str, Any] = {"syntheticMag": {"scale": 0.01}}
OGB_MAG: dict[str, Any] = {
    "ogb": {"path": "datasets/ogbn_mag"},
    "hetero": {
        "targetNodeType": "paper",
        "nodeTypes": ["paper", "author"],
        "edgeTypes": ["author__writes__paper", "paper__cites__paper"],
    },
}
RSAGE: dict[str, Any] = {"arch": "rsage", "numLayers": 2, "fanout": [10, 5]}


def _no_reverse(dataset: dict[str, Any]) -> dict[str, Any]:
    """The dataset with addReverseEdges off."""
    return {**dataset, "hetero": {**dataset.get("hetero", {}), "addReverseEdges": False}}


def _hetero(dataset: dict[str, Any] | None = None, **model: Any) -> dict[str, Any]:
    return {"dataset": dataset if dataset is not None else MAG, "model": {**RSAGE, **model}}


def _errors(spec: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(spec)
    return info.value.errors


# --------------------------------------------------------------------------- valid jobs


def test_a_minimal_synthetic_mag_job_is_heterogeneous_with_defaults() -> None:
    spec = parse_spec(_hetero())
    assert spec.dataset.is_hetero
    section = spec.dataset.hetero_section
    assert section is not None
    assert section.target_node_type == "paper"  # syntheticMag's only labelled type
    assert spec.dataset.hetero is None
    assert section.add_reverse_edges is True
    assert spec.model.arch is Arch.rsage
    assert spec.model.embedding_size == DEFAULT_EMBEDDING_DIM
    mag = spec.dataset.synthetic_mag
    assert mag is not None
    assert (mag.num_features, mag.num_classes, mag.scale) == (128, 349, 0.01)


def test_per_edge_type_fanouts_cover_relations_and_reverses() -> None:
    spec = parse_spec(
        _hetero(
            arch="rgcn",
            edgeFanouts={"author__writes__paper": [15, 10], "paper__rev_writes__author": [4, 2]},
            embeddingDim=64,
        )
    )
    assert spec.model.edge_fanouts == {
        "author__writes__paper": [15, 10],
        "paper__rev_writes__author": [4, 2],
    }
    assert spec.model.embedding_size == 64


def test_an_ogb_hetero_job_with_declared_types_and_a_reverse_fanout() -> None:
    spec = parse_spec(_hetero(OGB_MAG, edgeFanouts={"paper__rev_writes__author": [3, 3]}))
    assert spec.dataset.hetero_section == spec.dataset.hetero
    assert spec.dataset.is_hetero


def test_both_directions_may_be_declared_without_added_reverses() -> None:
    both = ["author__writes__paper", "paper__rev_writes__author", "paper__cites__paper"]
    hetero = {"edgeTypes": both, "addReverseEdges": False}
    spec = parse_spec(_hetero({"pyg": {"path": "g.pt"}, "hetero": hetero}))
    assert spec.dataset.hetero is not None
    assert spec.dataset.hetero.edge_types == both


def test_files_with_undeclared_types_are_checked_at_load_time_only() -> None:
    """Without edgeTypes admission cannot know the files' types: any well-formed key passes."""
    dataset = {"pyg": {"path": "mag.pt"}, "hetero": {}}
    spec = parse_spec(_hetero(dataset, edgeFanouts={"a__b__c": [1, 1]}))
    assert spec.dataset.is_hetero


# --------------------------------------------------------------------------- invalid jobs


@pytest.mark.parametrize(
    ("spec", "field", "phrase"),
    [
        (
            _hetero({"synthetic": {}, "hetero": {}}),
            "spec.dataset.hetero",
            "synthetic generates a homogeneous graph",
        ),
        (
            _hetero({**MAG, "hetero": {"targetNodeType": "author"}}),
            "spec.dataset.hetero.targetNodeType",
            "labels on paper only",
        ),
        (
            _hetero({**MAG, "hetero": {"edgeTypes": ["author__writes__paper"]}}),
            "spec.dataset.hetero",
            "remove them",
        ),
        (
            _hetero({"ogb": {"path": "m"}, "hetero": {"targetNodeType": "x", "nodeTypes": ["p"]}}),
            "spec.dataset.hetero.targetNodeType",
            "one of nodeTypes",
        ),
        (
            _hetero(
                {"ogb": {"path": "m"}, "hetero": {"nodeTypes": ["p"], "edgeTypes": ["a__r__p"]}}
            ),
            "spec.dataset.hetero.edgeTypes",
            "source and destination must be one of nodeTypes",
        ),
        (
            _hetero(
                {
                    "pyg": {"path": "g.pt"},
                    "hetero": {"edgeTypes": ["author__writes__paper", "paper__rev_writes__author"]},
                }
            ),
            "spec.dataset.hetero.edgeTypes",
            "set addReverseEdges to false when the files hold both directions",
        ),
        (
            _hetero({"ogb": {"path": "m"}, "hetero": {"nodeTypes": ["paper", "paper"]}}),
            "spec.dataset.hetero.nodeTypes",
            "twice",
        ),
        (
            _hetero({"ogb": {"path": "m"}, "hetero": {"nodeTypes": ["field__of"]}}),
            "spec.dataset.hetero.nodeTypes[0]",
            "not a type name",
        ),
        (
            _hetero({"ogb": {"path": "m"}, "hetero": {"edgeTypes": ["author__writes"]}}),
            "spec.dataset.hetero.edgeTypes[0]",
            "src__rel__dst",
        ),
        (
            _hetero({"ogb": {"path": "m"}, "hetero": {"targetNodeType": "paper_"}}),
            "spec.dataset.hetero.targetNodeType",
            "not a type name",
        ),
        (
            _hetero({"syntheticMag": {"scale": 0.001, "numClasses": 1000}}),
            "spec.dataset.syntheticMag.numClasses",
            "exceeds the papers at this scale",
        ),
        (
            _hetero({"syntheticMag": {"scale": 0.0001}}),
            "spec.dataset.syntheticMag.scale",
            "greater than or equal to 0.001",
        ),
        (
            _hetero({"syntheticMag": {}, "ogb": {"path": "m"}}),
            "spec.dataset.synthetic",
            "exactly one of synthetic, syntheticMag, syntheticLink, ogb or pyg",
        ),
        (
            {"dataset": {"synthetic": {}}, "model": {"arch": "rsage"}},
            "spec.model.arch",
            "rsage and rgcn are relational",
        ),
        (
            {"dataset": {"ogb": {"path": "m"}}, "model": {"arch": "rgcn"}},
            "spec.model.arch",
            "need a heterogeneous dataset",
        ),
        (_hetero(arch="sage"), "spec.model.arch", "set model.arch to rsage"),
        (_hetero(arch="gat"), "spec.model.arch", "needs a relational model"),
        (
            {
                "dataset": {"pyg": {"path": "g.pt"}},
                "model": {"edgeFanouts": {"a__r__b": [1, 1, 1]}},
            },
            "spec.model.edgeFanouts",
            "a homogeneous graph has one edge type: use fanout",
        ),
        (
            {"dataset": {"synthetic": {}}, "model": {"embeddingDim": 32}},
            "spec.model.embeddingDim",
            "remove it for a homogeneous graph",
        ),
        (
            _hetero(edgeFanouts={"author__writes__paper": [5, 5, 5]}),
            "spec.model.edgeFanouts",
            "exactly one entry per layer",
        ),
        (
            _hetero(edgeFanouts={"author__cites__paper": [5, 5]}),
            "spec.model.edgeFanouts",
            "syntheticMag does not have",
        ),
        (
            _hetero(_no_reverse(MAG), edgeFanouts={"paper__rev_writes__author": [5, 5]}),
            "spec.model.edgeFanouts",
            "unless dataset.hetero.addReverseEdges is false",
        ),
        (
            _hetero(edgeFanouts={"paper__rev_cites__paper": [5, 5]}),
            "spec.model.edgeFanouts",
            "syntheticMag does not have",
        ),
        (
            _hetero(OGB_MAG, edgeFanouts={"paper__writes__author": [5, 5]}),
            "spec.model.edgeFanouts",
            "neither in dataset.hetero.edgeTypes",
        ),
        (
            _hetero(OGB_MAG, edgeFanouts={"paper__rev_cites__paper": [5, 5]}),
            "spec.model.edgeFanouts",
            "neither in dataset.hetero.edgeTypes",
        ),
        (
            _hetero(_no_reverse(OGB_MAG), edgeFanouts={"paper__rev_writes__author": [5, 5]}),
            "spec.model.edgeFanouts",
            "neither in dataset.hetero.edgeTypes",
        ),
        (
            _hetero(edgeFanouts={"author__writes": [5, 5]}),
            "spec.model.edgeFanouts",
            "must be an edge type written src__rel__dst",
        ),
        (
            _hetero(edgeFanouts={"author___writes__paper": [5, 5]}),
            "spec.model.edgeFanouts",
            "must be an edge type written src__rel__dst",
        ),
        (
            _hetero(edgeFanouts={"author__writes__paper": [0, 5]}),
            "spec.model.edgeFanouts.author__writes__paper[0]",
            "greater than or equal to 1",
        ),
        (
            _hetero(edgeFanouts={"author__writes__paper": []}),
            "spec.model.edgeFanouts.author__writes__paper",
            "at least 1 item",
        ),
        (_hetero(embeddingDim=0), "spec.model.embeddingDim", "greater than or equal to 1"),
        (_hetero(embeddingDim=5000), "spec.model.embeddingDim", "less than or equal to 4096"),
    ],
)
def test_each_rule_names_its_field(spec: dict[str, Any], field: str, phrase: str) -> None:
    errors = _errors(spec)
    assert field in [path for path, _ in errors], errors
    assert any(phrase in message for _, message in errors), errors


def test_too_many_edge_fanouts_are_refused() -> None:
    fanouts = {f"a__r{i}__b": [1, 1] for i in range(129)}
    dataset = {"pyg": {"path": "g.pt"}, "hetero": {}}
    errors = _errors(_hetero(dataset, edgeFanouts=fanouts))
    assert [path for path, _ in errors] == ["spec.model.edgeFanouts"], errors


# --------------------------------------------------------------------------- the wire form


def test_homogeneous_jobs_write_no_hetero_fields() -> None:
    spec = parse_spec({"dataset": {"synthetic": {}}})
    text = job_config_json("j", "ns", "uid", spec)
    for name in ("syntheticMag", "hetero", "edgeFanouts", "embeddingDim"):
        assert name not in text
    assert '"ogb": null' in text  # the homogeneous fields are written as before


def test_hetero_fields_reach_the_job_config_and_read_back() -> None:
    spec = parse_spec(
        _hetero(OGB_MAG, edgeFanouts={"paper__rev_writes__author": [3, 3]}, embeddingDim=32)
    )
    config = json.loads(job_config_json("j", "ns", "uid", spec))
    assert config["spec"]["dataset"]["hetero"]["edgeTypes"] == OGB_MAG["hetero"]["edgeTypes"]
    assert config["spec"]["model"]["edgeFanouts"] == {"paper__rev_writes__author": [3, 3]}
    assert config["spec"]["model"]["embeddingDim"] == 32
    assert parse_spec(config["spec"]) == spec


def test_the_partition_key_follows_the_typed_dataset() -> None:
    base = parse_spec(_hetero())
    assert partition_key(base) != partition_key(parse_spec(_hetero(_no_reverse(MAG))))
    assert partition_key(base) != partition_key(parse_spec(_hetero({"syntheticMag": {}})))
    # The defaults written out are the same graph.
    for hetero in ({}, {"addReverseEdges": True, "targetNodeType": "paper"}):
        same = parse_spec(_hetero({**MAG, "hetero": hetero}))
        assert partition_key(same) == partition_key(base)
    # The model's fanouts do not change the partition.
    assert partition_key(base) == partition_key(
        parse_spec(_hetero(edgeFanouts={"author__writes__paper": [1, 1]}))
    )


# --------------------------------------------------------------------------- MAG shape


def test_full_scale_is_ogbn_mag() -> None:
    mag = SyntheticMagDataset()
    counts = {t.name: mag.num_nodes(t.name) for t in MAG_NODE_TYPES}
    assert counts == {
        "paper": 736_389,
        "author": 1_134_649,
        "institution": 8_740,
        "field_of_study": 59_965,
    }
    assert mag.num_edges(("author", "writes", "paper")) == 7_145_660
    assert sum(n for _, n in MAG_RELATIONS) == 7_145_660 + 5_416_271 + 7_505_078 + 1_043_998
    assert sum(MAG_SPLIT.values()) == 736_389
    assert [t.name for t in MAG_NODE_TYPES if t.num_features] == ["paper"]


def test_scaling_rounds_and_keeps_every_type() -> None:
    small = SyntheticMagDataset(scale=0.001)
    assert small.num_nodes("paper") == 736
    assert small.num_nodes("institution") == 9
    assert scaled_count(3, 0.01) == 1


def test_mag_reverses_follow_to_undirected() -> None:
    assert len(mag_edge_types(add_reverse_edges=False)) == 4
    with_reverses = mag_edge_types(add_reverse_edges=True)
    assert ("paper", "rev_writes", "author") in with_reverses
    assert ("paper", "cites", "paper") in with_reverses
    assert len(with_reverses) == 7


# --------------------------------------------------------------------------- at load time

LOADED = [parse_edge_type_key(k) for k in ("author__writes__paper", "paper__rev_writes__author")]


def test_fanouts_resolve_per_edge_type_with_the_default_for_the_rest() -> None:
    resolved = resolve_edge_fanouts([10, 5], {"paper__rev_writes__author": [2, 1]}, LOADED)
    assert resolved == {LOADED[0]: [10, 5], LOADED[1]: [2, 1]}
    assert resolve_edge_fanouts([3], None, LOADED) == {LOADED[0]: [3], LOADED[1]: [3]}


def test_a_fanout_for_an_edge_type_the_files_lack_names_the_field() -> None:
    with pytest.raises(HeteroMismatch) as info:
        resolve_edge_fanouts([10, 5], {"paper__cites__paper": [2, 1]}, LOADED)
    assert info.value.field == "spec.model.edgeFanouts"
    assert "paper__cites__paper is not an edge type of the dataset" in str(info.value)


def test_unset_hetero_fields_are_left_out_under_either_naming() -> None:
    spec = parse_spec({"dataset": {"synthetic": {}}})
    for by_alias, names in ((True, ("syntheticMag", "edgeFanouts")), (False, ("synthetic_mag",))):
        dumped = spec.model_dump(by_alias=by_alias)
        assert not set(names) & (set(dumped["dataset"]) | set(dumped["model"]))
        assert "hetero" not in dumped["dataset"]
        assert ("embeddingDim" if by_alias else "embedding_dim") not in dumped["model"]
    typed = parse_spec(_hetero(embeddingDim=16)).model_dump(by_alias=False)
    assert typed["model"]["embedding_dim"] == 16
    assert typed["dataset"]["synthetic_mag"]["scale"] == 0.01
