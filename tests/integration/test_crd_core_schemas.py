"""The core types in the CRD (Affinity, Toleration, ResourceRequirements) against the API
server's own OpenAPI for core/v1: the same fields, the same types, at least its required
fields, and only the omissions that api/core_types.py documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distgnn_operator import crd
from tests.support.controlplane import ControlPlane

pytestmark = pytest.mark.integration

# Fields of the core types that the job does not take (api/core_types.py says why).
OMITTED = {
    "ResourceRequirements": {"claims"},
    "PodAffinityTerm": {"matchLabelKeys", "mismatchLabelKeys"},
}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


@pytest.fixture(scope="module")
def core_schemas(control_plane: ControlPlane) -> dict[str, Any]:
    raw = control_plane.kubectl("get", "--raw", "/openapi/v3/api/v1").stdout
    schemas: dict[str, Any] = json.loads(raw)["components"]["schemas"]
    return schemas


def _ref(node: dict[str, Any]) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    for sub in node.get("allOf", []):
        if "$ref" in sub:
            return str(sub["$ref"]).rsplit("/", 1)[-1]
    return None


def compare(ours: dict[str, Any], name: str, schemas: dict[str, Any], path: str) -> list[str]:
    """Differences between our schema node and the API server's definition ``name``."""
    theirs = schemas[name]
    short = name.rsplit(".", 1)[-1]
    problems: list[str] = []
    their_props: dict[str, Any] = theirs.get("properties", {})
    our_props: dict[str, Any] = ours.get("properties", {})
    for field in sorted(set(their_props) - set(our_props) - OMITTED.get(short, set())):
        problems.append(f"{path}: missing {short}.{field}")
    for field, sub in our_props.items():
        if field not in their_props:
            problems.append(f"{path}.{field}: not a field of {short}")
            continue
        their = their_props[field]
        ref = _ref(their)
        if ref == QUANTITY:
            continue
        if ref is not None:
            problems += compare(sub, ref, schemas, f"{path}.{field}")
            continue
        if sub.get("type") != their.get("type"):
            problems.append(f"{path}.{field}: type {sub.get('type')} != {their.get('type')}")
        if their.get("type") == "array":
            item_ref = _ref(their["items"])
            if item_ref is not None:
                problems += compare(sub["items"], item_ref, schemas, f"{path}.{field}[]")
            elif sub["items"].get("type") != their["items"].get("type"):
                problems.append(f"{path}.{field}[]: item type differs")
    missing_required = set(theirs.get("required", [])) - set(ours.get("required", []))
    if missing_required:
        problems.append(f"{path}: does not require {sorted(missing_required)}")
    return problems


@pytest.mark.parametrize(
    ("path", "definition"),
    [
        (("scheduling", "affinity"), "io.k8s.api.core.v1.Affinity"),
        (("scheduling", "tolerations", "[]"), "io.k8s.api.core.v1.Toleration"),
        (("trainers", "resources"), "io.k8s.api.core.v1.ResourceRequirements"),
        (("partition", "resources"), "io.k8s.api.core.v1.ResourceRequirements"),
    ],
)
def test_core_type_matches_the_api_server(
    core_schemas: dict[str, Any], path: tuple[str, ...], definition: str
) -> None:
    node = crd.build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for part in path:
        node = node["items"] if part == "[]" else node["properties"][part]
    problems = compare(node, definition, core_schemas, "spec." + ".".join(path))
    assert not problems, "\n".join(problems)
