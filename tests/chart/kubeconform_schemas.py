"""Offline JSON schemas for kubeconform: core kinds from the API server's OpenAPI, CRDs converted.

kubeconform looks a manifest's schema up at ``<dir>/{{ .ResourceKind }}{{ .KindSuffix }}.json``:
the lower-case kind, then ``-<first label of the group>`` (none for the core group), then
``-<version>``; e.g. ``deployment-apps-v1.json``, ``service-v1.json``,
``distgnnjob-distgnn-v1alpha1.json``. Every schema is standalone (the definitions it references
are copied into it) and strict: objects admit only the properties they declare, as the API
server's pruning does, so a misspelt field fails validation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

SCHEMA_LOCATION = "{{ .ResourceKind }}{{ .KindSuffix }}.json"

_INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
# resource.Quantity is a string in the OpenAPI, but YAML authors write `cpu: 1`.
_QUANTITY_DEF = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_QUANTITY = {"oneOf": [{"type": "string"}, {"type": "number"}]}
_OBJECT_META_DEF = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def schema_file_name(group: str, version: str, kind: str) -> str:
    """The file name kubeconform asks for (its KindSuffix rule)."""
    suffix = f"-{group.split('.')[0].lower()}" if group else ""
    return f"{kind.lower()}{suffix}-{version.lower()}.json"


def _convert(node: Any, *, ref_prefix: str) -> Any:
    """An OpenAPI (v2 or v3 structural) schema node as JSON schema, strict."""
    if isinstance(node, list):
        return [_convert(x, ref_prefix=ref_prefix) for x in node]
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-int-or-string") or node.get("format") == "int-or-string":
        out: dict[str, Any] = copy.deepcopy(_INT_OR_STRING)
        if "description" in node:
            out["description"] = node["description"]
        return out
    out = {}
    for key, value in node.items():
        if key == "$ref":
            out["$ref"] = ref_prefix + value.rsplit("/", 1)[-1]
        elif key in ("properties", "patternProperties", "definitions"):
            out[key] = {k: _convert(v, ref_prefix=ref_prefix) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not", "allOf", "anyOf", "oneOf"):
            out[key] = _convert(value, ref_prefix=ref_prefix)
        elif key.startswith("x-kubernetes-") or key in ("nullable", "example", "externalDocs"):
            continue
        else:
            out[key] = value
    # OpenAPI v3.0 flags an exclusive bound beside minimum/maximum; draft 7 writes the bound.
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(flag), bool) and out.pop(flag) and bound in out:
            out[flag] = out.pop(bound)
    if node.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value.rsplit("/", 1)[-1]
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _closure(definitions: Mapping[str, Any], roots: Iterable[str]) -> list[str]:
    seen: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in definitions:
            continue
        seen.append(name)
        todo.extend(_refs(definitions[name]))
    return seen


def _converted_definitions(swagger: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    defs = swagger["definitions"]
    out: dict[str, Any] = {}
    for name in names:
        if name == _QUANTITY_DEF:
            out[name] = copy.deepcopy(_QUANTITY)
        else:
            out[name] = _convert(defs[name], ref_prefix="#/definitions/")
    return out


def core_schemas(swagger: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Standalone schemas of every kind in an OpenAPI v2 document, by file name."""
    defs = swagger["definitions"]
    out: dict[str, dict[str, Any]] = {}
    for name, definition in defs.items():
        for gvk in definition.get("x-kubernetes-group-version-kind", []):
            file_name = schema_file_name(gvk["group"], gvk["version"], gvk["kind"])
            if file_name in out:
                continue
            others = [d for d in _closure(defs, [name]) if d != name]
            schema = _convert(definition, ref_prefix="#/definitions/")
            schema["$schema"] = "http://json-schema.org/draft-07/schema#"
            schema["definitions"] = _converted_definitions(swagger, others)
            out[file_name] = schema
    return out


def crd_schemas(crd: Mapping[str, Any], swagger: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Standalone schemas of every served version of a CustomResourceDefinition, by file name.

    The API server accepts apiVersion, kind and metadata (an ObjectMeta) on every custom
    resource whether or not the CRD's schema names them, so they are added at the root.
    """
    spec = crd["spec"]
    group, kind = spec["group"], spec["names"]["kind"]
    meta_defs = _closure(swagger["definitions"], [_OBJECT_META_DEF])
    out: dict[str, dict[str, Any]] = {}
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        raw = (version.get("schema") or {}).get("openAPIV3Schema") or {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
        schema = _convert(raw, ref_prefix="#/definitions/")
        props = schema.setdefault("properties", {})
        props["apiVersion"] = {"type": "string", "enum": [f"{group}/{version['name']}"]}
        props["kind"] = {"type": "string", "enum": [kind]}
        props["metadata"] = {"$ref": f"#/definitions/{_OBJECT_META_DEF}"}
        if not raw.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
        schema["definitions"] = _converted_definitions(swagger, meta_defs)
        out[schema_file_name(group, version["name"], kind)] = schema
    return out


def write_schemas(
    out_dir: Path, swagger: Mapping[str, Any], crds: Iterable[Mapping[str, Any]] = ()
) -> Path:
    """Write core and CRD schemas into out_dir; returns the -schema-location to pass kubeconform."""
    out_dir.mkdir(parents=True, exist_ok=True)
    schemas = core_schemas(swagger)
    for crd in crds:
        schemas.update(crd_schemas(crd, swagger))
    for file_name, schema in schemas.items():
        (out_dir / file_name).write_text(json.dumps(schema))
    return out_dir / SCHEMA_LOCATION
