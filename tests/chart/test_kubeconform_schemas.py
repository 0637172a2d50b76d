"""The OpenAPI → kubeconform schema conversion (on a small OpenAPI document and the chart's CRDs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.chart.kubeconform_schemas import (
    SCHEMA_LOCATION,
    core_schemas,
    crd_schemas,
    schema_file_name,
    write_schemas,
)
from tests.chart.values_doc import CHART_DIR

META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
SWAGGER: dict[str, Any] = {
    "definitions": {
        META: {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
            "type": "string",
            "format": "int-or-string",
        },
        "io.k8s.api.apps.v1.Widget": {
            "type": "object",
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"$ref": f"#/definitions/{META}"},
                "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.WidgetSpec"},
            },
            "x-kubernetes-group-version-kind": [
                {"group": "apps", "version": "v1", "kind": "Widget"}
            ],
        },
        "io.k8s.api.apps.v1.WidgetSpec": {
            "type": "object",
            "properties": {
                "memory": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
                "replicas": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            },
        },
        "io.k8s.api.core.v1.Thing": {
            "type": "object",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}},
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Thing"}],
        },
    }
}


def _crds() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((CHART_DIR / "crds").glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def test_file_names_follow_kubeconform_kind_suffix() -> None:
    assert schema_file_name("apps", "v1", "Deployment") == "deployment-apps-v1.json"
    assert schema_file_name("", "v1", "Service") == "service-v1.json"
    assert schema_file_name("rbac.authorization.k8s.io", "v1", "Role") == "role-rbac-v1.json"
    assert (
        schema_file_name("distgnn.io", "v1alpha1", "DistGNNJob")
        == "distgnnjob-distgnn-v1alpha1.json"
    )


def test_core_schema_is_standalone_and_strict() -> None:
    schemas = core_schemas(SWAGGER)
    assert set(schemas) == {"widget-apps-v1.json", "thing-v1.json"}
    widget = schemas["widget-apps-v1.json"]
    good = {
        "apiVersion": "apps/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"memory": 1, "port": "http", "replicas": 2},
    }
    jsonschema.validate(good, widget)
    jsonschema.validate({**good, "spec": {"memory": "1Gi", "port": 8080}}, widget)
    for bad in (
        {**good, "spec": {"replica": 2}},  # misspelt field
        {**good, "spec": {"port": 1.5}},  # neither int nor string
        {**good, "spec": {"replicas": 0}},  # exclusive minimum
        {**good, "metadata": {"labels": {"a": 1}}},  # label values are strings
        {"apiVersion": "apps/v1", "kind": "Widget"},  # spec is required
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, widget)


def test_chart_crds_convert() -> None:
    crds = _crds()
    kinds = {c["spec"]["names"]["kind"] for c in crds}
    assert {"KopfPeering", "ClusterKopfPeering"} <= kinds
    schemas: dict[str, dict[str, Any]] = {}
    for crd in crds:
        schemas.update(crd_schemas(crd, SWAGGER))
    peering = schemas["kopfpeering-kopf-v1.json"]
    ok = {
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfPeering",
        "metadata": {"name": "p"},
        "status": {"any": {"x": 1}},
    }
    jsonschema.validate(ok, peering)
    for bad in (
        {**ok, "spec": {}},  # the CRD declares no spec
        {**ok, "apiVersion": "kopf.dev/v2"},
        {**ok, "metadata": {"nmae": "p"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, peering)


def test_write_schemas_returns_the_location_template(tmp_path: Path) -> None:
    location = write_schemas(tmp_path, SWAGGER, _crds())
    assert location == tmp_path / SCHEMA_LOCATION
    assert (tmp_path / "widget-apps-v1.json").is_file()
    assert (tmp_path / "clusterkopfpeering-kopf-v1.json").is_file()
