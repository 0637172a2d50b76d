"""Generates the DistGNNJob CustomResourceDefinition from the pydantic models in distgnn_api.spec.

The models are the source of truth; this module turns their JSON schema into a structural
OpenAPI v3 schema (inlined refs, no titles, optional fields without the null branch,
int-or-string quantities, Kubernetes-style exclusive bounds), keeps the field docstrings as
descriptions for ``kubectl explain``, fills in defaults (also of default factories, so the API
server defaults nested objects and the CEL rules can rely on them) and adds the CEL rules.

Regenerate the checked-in file with::

    python -m distgnn_operator.crd --write
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import core_schema

from distgnn_api.spec import (
    GROUP,
    JOB_NAME_PATTERN,
    KIND,
    MAX_JOB_NAME_LENGTH,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    DistGNNJobSpec,
    DistGNNJobStatus,
)

CRD_NAME = f"{PLURAL}.{GROUP}"
CRD_PATH = Path("charts/distgnn/crds/distgnn.io_distgnnjobs.yaml")
"""Where the chart ships the CRD, relative to the repository root."""

# Spec fields that cannot change once the job exists: the operator has built the partition and
# the pods from them. runPolicy (suspend, deadline, TTL, backoff), scheduling (Kueue rewrites it
# while a job is suspended), images and networkPolicy stay mutable.
IMMUTABLE_SPEC_FIELDS = (
    "dataset",
    "partition",
    "samplers",
    "trainers",
    "model",
    "training",
    "storage",
    "metricsPort",
    "task",
    "linkPrediction",
)

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Partitions", "type": "integer", "jsonPath": ".status.partition.numPartitions"},
    {"name": "Epoch", "type": "integer", "jsonPath": ".status.progress.epoch"},
    {"name": "Seeds/s", "type": "number", "jsonPath": ".status.progress.seedsPerSecond"},
    {"name": "Restarts", "type": "integer", "jsonPath": ".status.restarts", "priority": 1},
    # Kueue's word on a queued job's Workload: why it waits (e.g. Pending, Preempted) or Admitted.
    {"name": "Kueue", "type": "string", "jsonPath": ".status.kueue.reason", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

ROOT_RULES: list[dict[str, Any]] = [
    {
        "rule": f"size(self.metadata.name) <= {MAX_JOB_NAME_LENGTH}",
        "message": (
            f"metadata.name must be at most {MAX_JOB_NAME_LENGTH} characters: it prefixes the "
            "names of the job's StatefulSets, pods and their labels"
        ),
        "fieldPath": ".metadata.name",
        "reason": "FieldValueInvalid",
    }
]

# The API server lets a CRD restrict metadata.name (and nothing else in metadata).
METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {
            "type": "string",
            "description": (
                "Job name: a DNS-1035 label (lower-case letters, digits and '-', starting with "
                f"a letter, no dots) of at most {MAX_JOB_NAME_LENGTH} characters."
            ),
            "pattern": JOB_NAME_PATTERN,
        }
    },
}

_NULL = {"type": "null"}
_DROP_KEYS = {"title", "additionalProperties", "$defs", "$ref", "anyOf", "const", "discriminator"}


class _CrdJsonSchema(GenerateJsonSchema):
    """Pydantic's JSON schema, with the defaults of default factories written out."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        if "default_factory" in schema and not schema.get("default_factory_takes_data"):
            value = schema["default_factory"]()  # type: ignore[call-arg]
            if isinstance(value, BaseModel):
                # Written out in full: the API server checks a default against the CEL rules
                # without defaulting inside it first.
                return value.model_dump(mode="json", by_alias=True, exclude_none=True)
            if isinstance(value, list | dict) and not value:
                return NoDefault
            return value
        default = schema.get("default", NoDefault)
        return NoDefault if default is None else default


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Inline a $ref; the referring node's own keys (description, default) win."""
    ref = node.get("$ref")
    if ref is None:
        return node
    target = defs[ref.rsplit("/", 1)[-1]]
    merged = {k: v for k, v in target.items() if k != "description" or "description" not in node}
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return _resolve(merged, defs)


def _collapse_any_of(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Drop the null branch of an optional field; keep int-or-string as Kubernetes writes it."""
    branches = node.get("anyOf")
    if branches is None:
        return node
    rest = [b for b in branches if b != _NULL]
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    if node.get("x-kubernetes-int-or-string"):
        outer["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        outer.pop("type", None)
        return outer
    if len(rest) == 1:
        inner = _resolve(rest[0], defs)
        if inner.get("x-kubernetes-int-or-string"):
            return _collapse_any_of({**inner, **outer}, defs)
        merged = dict(inner)
        if "description" in outer:
            merged.pop("description", None)
        merged.update(outer)
        return merged
    kinds = sorted(b.get("type", "") for b in rest)
    if kinds == ["integer", "string"]:
        outer["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        outer["x-kubernetes-int-or-string"] = True
        return outer
    raise ValueError(f"cannot express anyOf {branches!r} in a structural schema")


def structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Turn one pydantic JSON-schema node into a structural Kubernetes schema node."""
    node = _collapse_any_of(_resolve(node, defs), defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "properties":
            out[key] = {name: structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out[key] = structural(value, defs)
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and not isinstance(value, bool):
            # JSON Schema 2020-12 writes the bound itself; OpenAPI v3 a flag beside it.
            out["minimum" if key == "exclusiveMinimum" else "maximum"] = value
            out[key] = True
        else:
            out[key] = copy.deepcopy(value)
    if "const" in node:
        out["enum"] = [node["const"]]
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = structural(extra, defs)
    elif extra is True or (
        out.get("type") == "object" and extra is None and "properties" not in out
    ):
        # A free-form object (e.g. affinity): kept as written.
        out["x-kubernetes-preserve-unknown-fields"] = True
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    return out


_KEY_ORDER = (
    "type",
    "description",
    "default",
    "enum",
    "format",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "required",
    "items",
    "additionalProperties",
    "properties",
    "x-kubernetes-validations",
)


def ordered(node: dict[str, Any]) -> dict[str, Any]:
    """The same schema with keys in one reading order, so the YAML diffs cleanly."""
    rank = {k: i for i, k in enumerate(_KEY_ORDER)}
    out: dict[str, Any] = {}
    for key in sorted(node, key=lambda k: (rank.get(k, len(rank)), k)):
        value = node[key]
        if key == "properties":
            value = {name: ordered(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = ordered(value)
        elif key == "x-kubernetes-validations":
            value = [
                {k: rule[k] for k in ("rule", "message", "fieldPath", "reason") if k in rule}
                for rule in value
            ]
        out[key] = value
    return out


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of one model."""
    raw = model.model_json_schema(by_alias=True, mode="validation", schema_generator=_CrdJsonSchema)
    return structural(raw, raw.get("$defs", {}))


def _strip_defaults(node: dict[str, Any]) -> dict[str, Any]:
    """Status is written by the operator alone: no API-server defaults there."""
    out = {k: v for k, v in node.items() if k != "default"}
    if "properties" in out:
        out["properties"] = {k: _strip_defaults(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strip_defaults(out[key])
    return out


def spec_schema() -> dict[str, Any]:
    """Schema of .spec, with the immutability rules of IMMUTABLE_SPEC_FIELDS."""
    schema = model_schema(DistGNNJobSpec)
    for name in IMMUTABLE_SPEC_FIELDS:
        prop = schema["properties"][name]
        prop.setdefault("x-kubernetes-validations", []).append(
            {
                "rule": "self == oldSelf",
                "message": f"{name} is immutable: delete the job and create it again to change it",
            }
        )
    return schema


def status_schema() -> dict[str, Any]:
    """Schema of .status; conditions form a map keyed by type."""
    schema = _strip_defaults(model_schema(DistGNNJobStatus))
    conditions = schema["properties"]["conditions"]
    conditions["x-kubernetes-list-type"] = "map"
    conditions["x-kubernetes-list-map-keys"] = ["type"]
    conditions["items"]["required"] = sorted(conditions["items"].get("required", []))
    return schema


def build_crd() -> dict[str, Any]:
    """The whole CustomResourceDefinition."""
    spec = spec_schema()
    spec["description"] = (DistGNNJobSpec.__doc__ or "").strip()
    status = status_schema()
    root: dict[str, Any] = {
        "type": "object",
        "description": (
            "DistGNNJob runs distributed GNN training: a partition Job on a shared volume, then "
            "sampler and trainer StatefulSets behind a headless Service."
        ),
        "required": ["spec"],
        "properties": {
            "apiVersion": {
                "type": "string",
                "description": "APIVersion defines the versioned schema of this representation.",
            },
            "kind": {
                "type": "string",
                "description": "Kind is the REST resource this object represents.",
            },
            "metadata": copy.deepcopy(METADATA_SCHEMA),
            "spec": ordered(spec),
            "status": ordered(status),
        },
        "x-kubernetes-validations": copy.deepcopy(ROOT_RULES),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "labels": {"app.kubernetes.io/name": "distgnn"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": ["distgnn"],
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS),
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


HEADER = (
    "# Generated by `python -m distgnn_operator.crd --write` from distgnn_api.spec; do not edit.\n"
)


def render() -> str:
    """The CRD as the YAML file the chart ships."""
    return HEADER + yaml.safe_dump(build_crd(), sort_keys=False, width=100, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    """Print the CRD, write it to the chart (--write), or check the chart's copy (--check)."""
    parser = argparse.ArgumentParser(
        prog="python -m distgnn_operator.crd", description=main.__doc__
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {CRD_PATH}")
    group.add_argument("--check", action="store_true", help=f"fail if {CRD_PATH} is stale")
    parser.add_argument("--path", type=Path, default=CRD_PATH, help="file for --write/--check")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(text)
        return 0
    if args.check:
        if not args.path.exists() or args.path.read_text() != text:
            print(
                f"{args.path} is stale: run `python -m distgnn_operator.crd --write`",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
