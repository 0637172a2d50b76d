"""values.yaml, the chart README and values.schema.json agree on every key."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.chart.values_doc import (
    CHART_DIR,
    documented_values,
    leaf_paths,
    load_values,
    readme_table,
)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    data = json.loads((CHART_DIR / "values.schema.json").read_text())
    assert isinstance(data, dict)
    return data


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The schema node of a dotted key path, following properties and $refs."""
    node: dict[str, Any] = schema
    for part in path.split("."):
        while "$ref" in node:
            node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif (
            node.get("type") == "object"
            and "properties" not in node
            and node.get("additionalProperties") is not False
        ):
            return node  # a free-form object: anything below it is allowed
        else:
            return None
    return node


def test_every_value_is_documented() -> None:
    documented = {v.path for v in documented_values()}
    for leaf in leaf_paths(load_values()):
        assert any(leaf == p or leaf.startswith(p + ".") for p in documented), (
            f"values.yaml: {leaf} has no '# --' description on it or on a parent key"
        )


def test_readme_documents_every_value() -> None:
    readme = (CHART_DIR / "README.md").read_text()
    missing = [line for line in readme_table().splitlines()[2:] if line not in readme.splitlines()]
    assert not missing, (
        "charts/distgnn/README.md is out of date with values.yaml; its values table should hold "
        "these rows (tests.chart.values_doc.readme_table() prints the whole table):\n"
        + "\n".join(missing)
    )


def test_schema_covers_every_value(schema: dict[str, Any]) -> None:
    for value in documented_values():
        assert _schema_at(schema, value.path) is not None, f"values.schema.json lacks {value.path}"
    for leaf in leaf_paths(load_values()):
        assert _schema_at(schema, leaf) is not None, f"values.schema.json lacks {leaf}"


def test_schema_accepts_defaults_and_rejects_typos(schema: dict[str, Any]) -> None:
    jsonschema.Draft7Validator.check_schema(schema)
    values = load_values()
    jsonschema.validate(values, schema)
    bad_cases: list[tuple[str, Any]] = [
        ("operator", {**values["operator"], "replica": 2}),
        ("operator", {**values["operator"], "logLevel": "verbose"}),
        ("operator", {**values["operator"], "watchNamespaces": ["Not_A_Namespace"]}),
        ("metrics", {**values["metrics"], "port": 70000}),
        ("dashboards", {**values["dashboards"], "enabled": "yes"}),
        ("image", {**values["image"], "pullPolicy": "Sometimes"}),
    ]
    for key, bad in bad_cases:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**values, key: bad}, schema)
