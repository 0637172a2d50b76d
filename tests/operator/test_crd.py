"""The generated CRD: in sync with the models, structural, documented, and carrying every rule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api.core_types import CORE_RULES
from distgnn_api.spec import CEL_RULES, MAX_JOB_NAME_LENGTH, QUANTITY_PATTERN
from distgnn_operator import crd

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def test_checked_in_crd_matches_the_models() -> None:
    checked_in = (ROOT / crd.CRD_PATH).read_text()
    assert checked_in == crd.render(), (
        f"{crd.CRD_PATH} drifted from distgnn_api.spec: run `python -m distgnn_operator.crd --write`"
    )


def test_check_flag_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text(crd.render().replace("dgj", "xyz"))
    assert crd.main(["--check", "--path", str(stale)]) == 1
    assert crd.main(["--write", "--path", str(stale)]) == 0
    assert crd.main(["--check", "--path", str(stale)]) == 0
    assert yaml.safe_load(stale.read_text())["metadata"]["name"] == "distgnnjobs.distgnn.io"


def test_schema_is_structural(schema: dict[str, Any]) -> None:
    forbidden = {"$ref", "$defs", "title", "const", "allOf", "oneOf", "not"}
    for path, node in walk(schema):
        assert not forbidden & node.keys(), f"{path} has {forbidden & node.keys()}"
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        elif path not in ("",):
            assert "type" in node, f"{path} has no type"
        assert node.get("additionalProperties") not in (True, False), path
        if "additionalProperties" in node:
            assert "properties" not in node, path
        assert {"type": "null"} not in node.get("anyOf", []), path


def test_every_spec_and_status_field_is_described(schema: dict[str, Any]) -> None:
    for top in ("spec", "status"):
        for path, node in walk(schema["properties"][top], f".{top}"):
            if path.endswith("{}") or (path.endswith("[]") and node.get("type") != "object"):
                continue
            assert node.get("description"), f"{path} has no description for kubectl explain"


def test_defaults_bounds_and_enums(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]["properties"]
    # Nested defaults are written out: the API server checks them against the CEL rules.
    assert spec["samplers"]["default"]["replicas"] == 2
    assert spec["model"]["default"]["fanout"] == [15, 10, 5]
    assert spec["samplers"]["properties"]["replicas"]["minimum"] == 0
    assert spec["trainers"]["properties"]["replicas"]["minimum"] == 1
    assert spec["model"]["properties"]["fanout"]["default"] == [15, 10, 5]
    assert spec["model"]["properties"]["arch"]["enum"] == ["sage", "gcn", "gat", "rsage", "rgcn"]
    lr = spec["training"]["properties"]["learningRate"]
    assert (lr["minimum"], lr["exclusiveMinimum"]) == (0.0, True)
    assert spec["networkPolicy"]["properties"]["monitoringNamespaceSelector"]["default"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    assert "default" not in spec["storage"]["properties"]["claimName"]
    assert schema["properties"]["spec"]["required"] == ["dataset"]
    for path, node in walk(schema["properties"]["status"]):
        assert "default" not in node, f"status field {path} has a default"


def test_quantities_are_int_or_string(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]["properties"]
    size = spec["storage"]["properties"]["size"]
    requests = spec["trainers"]["properties"]["resources"]["properties"]["requests"]
    for node in (size, requests["additionalProperties"]):
        assert node["x-kubernetes-int-or-string"] is True
        assert node["pattern"] == QUANTITY_PATTERN
    assert size["default"] == "50Gi"
    assert size["x-kubernetes-validations"][0]["rule"].endswith("isGreaterThan(quantity('0'))")


def test_no_free_form_objects(schema: dict[str, Any]) -> None:
    for path, node in walk(schema):
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
    affinity = schema["properties"]["spec"]["properties"]["scheduling"]["properties"]["affinity"]
    assert set(affinity["properties"]) == {"nodeAffinity", "podAffinity", "podAntiAffinity"}


def _rules_at(schema: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        path: node["x-kubernetes-validations"]
        for path, node in walk(schema)
        if "x-kubernetes-validations" in node
    }


def test_every_cel_rule_is_in_the_crd(schema: dict[str, Any]) -> None:
    found = [rule for rules in _rules_at(schema).values() for rule in rules]
    for model, rules in CEL_RULES:
        for rule in rules:
            match = [r for r in found if r["rule"] == rule.rule]
            assert len(match) == 1, f"{model.__name__}: {rule.rule}"
            assert match[0]["message"] == rule.message
            assert match[0]["fieldPath"] == rule.field_path


def test_every_core_type_rule_is_in_the_crd(schema: dict[str, Any]) -> None:
    found = [rule for rules in _rules_at(schema).values() for rule in rules]
    for model, rules in CORE_RULES:
        for rule in rules:
            match = [r for r in found if r["rule"] == rule.rule]
            assert match, f"{model.__name__}: {rule.rule}"
            assert all(r["message"] == rule.message for r in match)
            assert all(r.get("fieldPath") == rule.field_path for r in match)


def test_every_rule_names_its_field(schema: dict[str, Any]) -> None:
    """A rule on an object names the field it is about, so no error reads '<nil>'."""
    for path, rules in _rules_at(schema).items():
        node = dict(walk(schema))[path]
        if node.get("type") != "object" or "properties" not in node:
            continue
        for rule in rules:
            if rule["rule"] == "self == oldSelf":
                continue
            assert rule.get("fieldPath"), f"{path}: {rule['rule']}"


def test_root_rule_limits_the_name(schema: dict[str, Any]) -> None:
    (rule,) = schema["x-kubernetes-validations"]
    assert rule["rule"] == f"size(self.metadata.name) <= {MAX_JOB_NAME_LENGTH}"
    assert "metadata.name" in rule["message"]
    assert rule["fieldPath"] == ".metadata.name"
    name = schema["properties"]["metadata"]["properties"]["name"]
    assert name["pattern"] == "^[a-z]([-a-z0-9]*[a-z0-9])?$"


def test_immutable_fields_have_transition_rules(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]["properties"]
    for name in crd.IMMUTABLE_SPEC_FIELDS:
        rules = spec[name]["x-kubernetes-validations"]
        assert {"rule": "self == oldSelf", "message": rules[-1]["message"]} in rules
        assert name in rules[-1]["message"]
    assert "x-kubernetes-validations" not in spec["runPolicy"]


def test_names_printer_columns_and_status_subresource() -> None:
    doc = crd.build_crd()
    assert doc["spec"]["names"]["shortNames"] == ["dgj"]
    version = doc["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "Partitions": ".status.partition.numPartitions",
        "Epoch": ".status.progress.epoch",
        "Seeds/s": ".status.progress.seedsPerSecond",
        "Val MRR": ".status.progress.valMrr",
        "Test MRR": ".status.progress.testMrr",
        "Restarts": ".status.restarts",
        "Kueue": ".status.kueue.reason",
        "Age": ".metadata.creationTimestamp",
    }
    conditions = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "conditions"
    ]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
