"""Invalid DistGNNJobs generated per field, for the differential test (pydantic vs API server).

Two sources:
- the models' own constraints, read from their schema (bounds, enums, patterns, lengths, list
  sizes, types, unknown fields), for every leaf field of the spec;
- Kubernetes' rules for the fields that end up in a child (names, label keys and values,
  quantities, resources, tolerations, affinity, images, ports), and the models' cross-field
  rules, written as hypothesis strategies.

Each case changes one field of a valid job and names that field. ``generate(seed, per_field)``
draws ``per_field`` examples of each field's strategy with hypothesis under a fixed seed, so a
run is reproducible: the same seed gives the same cases.
"""

from __future__ import annotations

import copy
import json
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from distgnn_api.edge_types import edge_type_key
from distgnn_api.mag_shape import mag_edge_types
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator import crd

BASE_SPEC: dict[str, Any] = {"dataset": {"synthetic": {"numNodes": 1000, "numEdges": 4000}}}
# The valid heterogeneous jobs that cases about heterogeneous fields change.
MAG_BASE: list[tuple[str, Any]] = [
    ("spec/dataset", {"syntheticMag": {"scale": 0.01}}),
    ("spec/model/arch", "rsage"),
]
FILES_BASE: list[tuple[str, Any]] = [
    ("spec/dataset", {"ogb": {"path": "datasets/mag"}, "hetero": {}}),
    ("spec/model/arch", "rgcn"),
]
# The valid link-prediction job that cases about link-prediction fields change.
LINK_BASE: list[tuple[str, Any]] = [
    ("spec/dataset", {"syntheticLink": {"scale": 0.001}}),
    ("spec/task", "linkPrediction"),
    ("spec/linkPrediction", {}),
]
MAG_KEYS = [edge_type_key(et) for et in mag_edge_types(add_reverse_edges=True)]
INT_LIMIT = 2**53  # stays exact in JSON on both sides
ALPHABET = "abcXYZ019-_./: @~!#\t\n"


@dataclass(frozen=True)
class Case:
    """One invalid job: an id, the field it breaks and the manifest."""

    id: str
    field: str
    manifest: dict[str, Any]


@dataclass(frozen=True)
class FieldRule:
    """A field and a strategy of (path, value) changes that make it invalid."""

    field: str
    changes: st.SearchStrategy[list[tuple[str, Any]]]


def manifest(name: str, changes: list[tuple[str, Any]]) -> dict[str, Any]:
    """A valid job with the changes applied; a path like 'spec.trainers.replicas'."""
    doc: dict[str, Any] = {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": name},
        "spec": copy.deepcopy(BASE_SPEC),
    }
    for path, value in changes:
        node: Any = doc
        keys = path.split("/")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = copy.deepcopy(value)  # later changes must not edit a shared base
    return doc


def _set(path: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    return values.map(lambda v: [(path, v)])


def _text(min_size: int = 0, max_size: int = 20) -> st.SearchStrategy[str]:
    return st.text(alphabet=ALPHABET, min_size=min_size, max_size=max_size)


# --------------------------------------------------------------------------- from the models


def _leaves(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with a path: objects first, then their properties."""
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from _leaves(sub, f"{path}/{name}")


def _not_matching(pattern: str) -> st.SearchStrategy[str]:
    rx = re.compile(pattern)
    return _text(1, 12).filter(lambda s: rx.fullmatch(s) is None)


def _width(bound: float) -> Literal[32, 64]:
    """32-bit floats where the bound is one (e.g. 0.5), else 64-bit (e.g. 0.001)."""
    return 32 if struct.unpack("f", struct.pack("f", bound))[0] == bound else 64


def _model_rules(node: dict[str, Any], path: str) -> list[st.SearchStrategy[Any]]:
    """Values the schema node's own constraints refuse."""
    kind = node.get("type")
    out: list[st.SearchStrategy[Any]] = []
    if node.get("x-kubernetes-int-or-string"):
        return [st.sampled_from([True, [1], {"a": 1}])]
    if kind == "integer":
        out.append(st.one_of(_text(1, 5), st.booleans()))
        low = int(node.get("minimum", -INT_LIMIT)) - 1
        high = int(node.get("maximum", INT_LIMIT)) + 1
        if low >= -INT_LIMIT:
            out.append(st.integers(min_value=-INT_LIMIT, max_value=low))
        if high <= INT_LIMIT:
            out.append(st.integers(min_value=high, max_value=INT_LIMIT))
    elif kind == "number":
        out.append(st.one_of(_text(1, 5), st.booleans()))
        if "minimum" in node:
            fmin = float(node["minimum"])
            below = st.floats(
                max_value=fmin, allow_nan=False, allow_infinity=False, width=_width(fmin)
            )
            out.append(
                below.filter(lambda x: x < fmin or (x == fmin and node.get("exclusiveMinimum")))
            )
        if "maximum" in node:
            fmax = float(node["maximum"])
            above = st.floats(
                min_value=fmax, allow_nan=False, allow_infinity=False, width=_width(fmax)
            )
            out.append(
                above.filter(lambda x: x > fmax or (x == fmax and node.get("exclusiveMaximum")))
            )
    elif kind == "boolean":
        out.append(st.one_of(st.sampled_from(["true", "yes", "1"]), st.integers(0, 1)))
    elif kind == "string":
        out.append(st.integers(-5, 5))
        if "enum" in node:
            out.append(_text(1, 12).filter(lambda s: s not in node["enum"]))
        if "pattern" in node:
            out.append(_not_matching(node["pattern"]))
        if "maxLength" in node and "pattern" not in node and "enum" not in node:
            n = int(node["maxLength"])
            out.append(st.integers(n + 1, n + 40).map(lambda k: "a" * k))
        if node.get("minLength"):
            out.append(st.just(""))
    elif kind == "array":
        out.append(st.sampled_from(["x", 3, {"a": 1}]))
        if node.get("minItems"):
            out.append(st.just([]))
    elif kind == "object":
        out.append(st.sampled_from(["x", 3, [1]]))
        if "properties" in node:
            out.append(st.from_regex(r"\Abogus[A-Z][a-z]{2,6}\Z").map(lambda k: {k: 1}))
    return out


def _base_of(path: str) -> list[tuple[str, Any]]:
    """The valid job a field's cases change: a heterogeneous one for the heterogeneous fields."""
    if path.startswith("spec/dataset/syntheticMag"):
        return MAG_BASE
    if path.startswith(("spec/dataset/syntheticLink", "spec/linkPrediction")):
        return LINK_BASE
    if path.startswith(("spec/dataset/hetero", "spec/model/edgeFanouts", "spec/model/embedding")):
        return FILES_BASE
    return []


def _on_base(path: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    base = _base_of(path)
    return values.map(lambda v: [*base, (path, v)])


def model_field_rules() -> list[FieldRule]:
    """A rule per spec field, from the models' schema (as the CRD generator reads it)."""
    schema = crd.model_schema(DistGNNJobSpec)
    rules: list[FieldRule] = []
    for path, node in _leaves(schema, "spec"):
        if path == "spec":
            continue
        strategies = _model_rules(node, path)
        if not strategies:
            continue
        field = path.replace("/", ".")
        if node.get("type") == "object" and "properties" in node:
            # An unknown key inside the object, or the object replaced by a scalar.
            bogus = strategies.pop()
            rules.append(FieldRule(field, _on_base(path, bogus)))
        if strategies:
            rules.append(FieldRule(field, _on_base(path, st.one_of(strategies))))
    return rules


# --------------------------------------------------------------------------- Kubernetes' rules

_BAD_DNS = st.one_of(
    st.sampled_from(["Upper", "under_score", "-lead", "trail-", "sp ace", "a..b", ".dot", "ä"]),
    st.integers(254, 300).map(lambda n: "a" * n),
    _text(1, 10).filter(
        lambda s: (
            re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", s)
            is None
        )
    ),
)
_BAD_LABEL_VALUE = st.one_of(
    st.sampled_from(["-lead", "trail.", "sp ace", "a/b", "x:y", "ü"]),
    st.integers(64, 90).map(lambda n: "v" * n),
)
_BAD_KEY = st.one_of(
    st.sampled_from(
        ["Bad Key", "-lead", "a/b/c", "/name", "UPPER.example.com/x", "a" * 64, "x/" + "b" * 64]
    ),
    st.integers(254, 260).map(lambda n: "p" * n + "/name"),
)
_BAD_QUANTITY = st.one_of(
    st.sampled_from(["lots", "10 Gi", "1e2.5", "--1", "1.2.3", " 1", "1Gb", "0x10", "Inf"]),
    st.integers(-(10**9), -1),
    st.integers(-(10**6), -1).map(lambda n: f"{n}Mi"),
    st.integers(1, 10**6).map(lambda n: f"-{n}m"),
)
_WS = st.sampled_from([" ", "\t", "\n", "  "])


def _label_map(path: str) -> st.SearchStrategy[list[tuple[str, Any]]]:
    bad_key = _BAD_KEY.map(lambda k: [(path, {k: "v"})])
    bad_value = _BAD_LABEL_VALUE.map(lambda v: [(path, {"example.com/k": v})])
    return st.one_of(bad_key, bad_value)


def _resources(path: str) -> st.SearchStrategy[list[tuple[str, Any]]]:
    res = path + "/resources"
    return st.one_of(
        _BAD_QUANTITY.map(lambda q: [(res, {"requests": {"cpu": q}})]),
        _BAD_QUANTITY.map(lambda q: [(res, {"limits": {"memory": q}})]),
        st.sampled_from(
            ["gpu", "cpus", "nvidia.com/gpu", "kubernetes.io/x", "Memory", "a/b/c"]
        ).map(lambda n: [(res, {"requests": {n: "1"}})]),
        st.integers(2, 64).map(
            lambda n: [(res, {"requests": {"cpu": str(n)}, "limits": {"cpu": "1"}})]
        ),
        st.integers(2, 64).map(
            lambda n: [(res, {"requests": {"memory": f"{n}Gi"}, "limits": {"memory": "1Gi"}})]
        ),
        st.sampled_from(["1.5", "500m"]).map(
            lambda q: [
                (res, {"requests": {"example.com/fpga": q}, "limits": {"example.com/fpga": q}})
            ]
        ),
        st.integers(1, 4).map(lambda n: [(res, {"requests": {"example.com/fpga": n}})]),
    )


def _toleration() -> st.SearchStrategy[list[tuple[str, Any]]]:
    path = "spec/scheduling/tolerations"
    return st.one_of(
        _text(1, 8).map(
            lambda v: [
                (path, [{"key": "k", "operator": "Exists", "value": "v" + v.strip()[:3] or "v"}])
            ]
        ),
        st.integers(0, 3600).map(
            lambda s: [(path, [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": s}])]
        ),
        st.integers(0, 3600).map(lambda s: [(path, [{"key": "k", "tolerationSeconds": s}])]),
        st.just([(path, [{"operator": "Equal", "value": "v"}])]),
        _BAD_KEY.map(lambda k: [(path, [{"key": k, "operator": "Exists"}])]),
        _BAD_LABEL_VALUE.map(lambda v: [(path, [{"key": "k", "value": v}])]),
        st.sampled_from(["Sometimes", "NoEffect"]).map(
            lambda e: [(path, [{"key": "k", "effect": e}])]
        ),
    )


def node_term(expr: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }


def _pod_term(term: dict[str, Any], anti: bool = False) -> dict[str, Any]:
    key = "podAntiAffinity" if anti else "podAffinity"
    return {key: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _affinity() -> st.SearchStrategy[list[tuple[str, Any]]]:
    path = "spec/scheduling/affinity"
    host = "kubernetes.io/hostname"
    values = st.lists(_text(1, 5).filter(lambda s: s.isalnum()), min_size=1, max_size=3)
    return st.one_of(
        st.sampled_from(["In", "NotIn"]).map(
            lambda op: [(path, node_term({"key": "k", "operator": op}))]
        ),
        values.map(lambda v: [(path, node_term({"key": "k", "operator": "Exists", "values": v}))]),
        st.sampled_from(["Gt", "Lt"]).flatmap(
            lambda op: st.sampled_from([["a"], ["1", "2"], ["1.5"]]).map(
                lambda v: [(path, node_term({"key": "k", "operator": op, "values": v}))]
            )
        ),
        st.sampled_from(["Equals", "in", "Has"]).map(
            lambda op: [(path, node_term({"key": "k", "operator": op}))]
        ),
        _BAD_KEY.map(lambda k: [(path, node_term({"key": k, "operator": "Exists"}))]),
        st.just(
            [
                (
                    path,
                    {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": []
                            }
                        }
                    },
                )
            ]
        ),
        st.sampled_from([0, 101, -1]).map(
            lambda w: [
                (
                    path,
                    {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": w, "preference": {}}
                            ]
                        }
                    },
                )
            ]
        ),
        st.booleans().map(lambda anti: [(path, _pod_term({"labelSelector": {}}, anti))]),
        _BAD_KEY.map(lambda k: [(path, _pod_term({"topologyKey": k}))]),
        _BAD_LABEL_VALUE.map(
            lambda v: [
                (
                    path,
                    _pod_term(
                        {"topologyKey": host, "labelSelector": {"matchLabels": {"app": v}}}, True
                    ),
                )
            ]
        ),
        _BAD_DNS.filter(lambda s: len(s) < 64).map(
            lambda ns: [(path, _pod_term({"topologyKey": host, "namespaces": [ns]}))]
        ),
        st.sampled_from(["In", "NotIn"]).map(
            lambda op: [
                (
                    path,
                    _pod_term(
                        {
                            "topologyKey": host,
                            "labelSelector": {"matchExpressions": [{"key": "a", "operator": op}]},
                        }
                    ),
                )
            ]
        ),
        st.sampled_from(["x", "requiredDuring", "nodeAffinityTypo"]).map(
            lambda k: [(path, {k: {}})]
        ),
        st.sampled_from(["x", 3, [1]]).map(lambda v: [(path, {"nodeAffinity": v})]),
    )


def _dataset_path(source: str) -> Callable[[list[str]], list[tuple[str, Any]]]:
    return lambda parts: [("spec/dataset", {source: {"path": "/".join(parts)}})]


def kubernetes_rules() -> list[FieldRule]:
    """Rules Kubernetes applies to the values the job passes to its children."""
    rules = [
        FieldRule(f"spec.{p.replace('/', '.')}", _set(f"spec/{p}", _BAD_DNS))
        for p in (
            "storage/claimName",
            "storage/storageClassName",
            "serviceAccountName",
            "scheduling/schedulerName",
            "scheduling/priorityClassName",
        )
    ]
    rules += [
        FieldRule(
            "spec.images.pullSecrets", _BAD_DNS.map(lambda s: [("spec/images/pullSecrets", [s])])
        ),
        FieldRule("spec.scheduling.nodeSelector", _label_map("spec/scheduling/nodeSelector")),
        FieldRule("spec.scheduling.labels", _label_map("spec/scheduling/labels")),
        FieldRule(
            "spec.scheduling.annotations",
            st.one_of(
                _BAD_KEY.map(lambda k: [("spec/scheduling/annotations", {k: "any value"})]),
                # values beyond what keeps all annotations under Kubernetes' 256 KiB
                st.integers(901, 2000).map(
                    lambda n: [("spec/scheduling/annotations", {"a": "x" * n})]
                ),
            ),
        ),
        FieldRule(
            "spec.networkPolicy.monitoringNamespaceSelector",
            _label_map("spec/networkPolicy/monitoringNamespaceSelector"),
        ),
        FieldRule(
            "spec.networkPolicy.monitoringPodSelector",
            _label_map("spec/networkPolicy/monitoringPodSelector"),
        ),
        FieldRule(
            "spec.storage.size",
            _set(
                "spec/storage/size",
                st.one_of(_BAD_QUANTITY, st.sampled_from(["0", 0, "0Gi", "0.0", "0m"])),
            ),
        ),
        FieldRule(
            "spec.samplers.featureMemory",
            _set(
                "spec/samplers/featureMemory",
                st.one_of(_BAD_QUANTITY, st.sampled_from(["Auto", "auto ", "autoGi", "-2Gi"])),
            ),
        ),
        FieldRule(
            "spec.trainers.embeddingMemory",
            _set(
                "spec/trainers/embeddingMemory",
                st.one_of(_BAD_QUANTITY, st.sampled_from(["AUTO", " auto", "-1", "4 Gi"])),
            ),
        ),
        FieldRule("spec.scheduling.tolerations", _toleration()),
        FieldRule("spec.scheduling.affinity", _affinity()),
        FieldRule("spec.metricsPort", _set("spec/metricsPort", st.sampled_from([29500, 29400]))),
    ]
    for role in ("partition", "samplers", "trainers"):
        rules.append(FieldRule(f"spec.{role}.resources", _resources(f"spec/{role}")))
    for image in ("gpu", "cpu"):
        core = st.sampled_from(["ghcr.io/x/y:1", "busybox", "a"])
        padded = st.tuples(_WS, core, st.integers(0, 2)).map(
            lambda t: (
                t[0] + t[1] if t[2] == 0 else (t[1] + t[0] if t[2] == 1 else t[0] + t[1] + t[0])
            )
        )
        rules.append(FieldRule(f"spec.images.{image}", _set(f"spec/images/{image}", padded)))
    for path in ("dataset/ogb/path", "dataset/pyg/path"):
        parts = st.lists(st.sampled_from(["a", "b1", "..", "x.y"]), min_size=1, max_size=4).filter(
            lambda p: ".." in p
        )
        rules.append(
            FieldRule(
                f"spec.{path.replace('/', '.')}",
                parts.map(_dataset_path(path.split("/")[1])),
            )
        )
    return rules


def cross_field_rules() -> list[FieldRule]:
    """The models' cross-field (CEL) rules, and the job name."""
    syn = "spec/dataset/synthetic"
    return [
        FieldRule(
            "metadata.name",
            st.one_of(
                st.from_regex(r"\A[0-9][a-z0-9]{0,10}\Z"),
                st.from_regex(r"\A[a-z]{1,8}\.[a-z]{1,8}\Z"),
                st.integers(45, 63).map(lambda n: "a" * n),
                st.sampled_from(["Upper", "under_score", "trail-", "-lead"]),
            ).map(lambda n: [("metadata/name", n)]),
        ),
        FieldRule(
            "spec.dataset.synthetic.trainFraction",
            st.floats(0.5, 0.9).map(
                lambda t: [(syn, {"trainFraction": t, "valFraction": 1.0 - t + 0.05})]
            ),
        ),
        FieldRule(
            "spec.dataset.synthetic.numEdges",
            st.integers(2, 50).map(
                lambda n: [(syn, {"numNodes": n, "numEdges": n * (n - 1) // 2 + 1})]
            ),
        ),
        FieldRule(
            "spec.dataset.synthetic",
            st.sampled_from(
                [
                    {},
                    {"synthetic": {}, "pyg": {"path": "g.pt"}},
                    {"ogb": {"path": "a"}, "pyg": {"path": "b"}},
                ]
            ).map(lambda d: [("spec/dataset", d)]),
        ),
        FieldRule(
            "spec.model.fanout",
            st.integers(1, 8).flatmap(
                lambda n: (
                    st.integers(1, 8)
                    .filter(lambda m: m != n)
                    .map(lambda m: [("spec/model", {"numLayers": n, "fanout": [5] * m})])
                )
            ),
        ),
        FieldRule(
            "spec.partition.numPartitions",
            st.integers(2, 16).flatmap(
                lambda r: (
                    st.integers(1, 64)
                    .filter(lambda p: p % r != 0)
                    .map(
                        lambda p: [
                            ("spec/samplers", {"replicas": r}),
                            ("spec/partition", {"numPartitions": p}),
                        ]
                    )
                )
            ),
        ),
        FieldRule(
            "spec.training.bf16",
            st.just([("spec/training", {"bf16": True}), ("spec/trainers", {"gpusPerPod": 0})]),
        ),
        FieldRule(
            "spec.model.heads",
            st.integers(2, 16).flatmap(
                lambda h: (
                    st.integers(1, 512)
                    .filter(lambda c: c % h != 0)
                    .map(
                        lambda c: [("spec/model", {"arch": "gat", "heads": h, "hiddenChannels": c})]
                    )
                )
            ),
        ),
        FieldRule(
            "spec.storage.storageClassName",
            st.just([("spec/storage", {"claimName": "data", "storageClassName": "fast"})]),
        ),
        FieldRule(
            "spec.networkPolicy.monitoringNamespaceSelector",
            st.just([("spec/networkPolicy", {"monitoringNamespaceSelector": {}})]),
        ),
    ]


# --------------------------------------------------------------------------- heterogeneous

_TYPE_NAME = st.from_regex(r"\A[a-z](_?[a-z0-9]){0,6}\Z")
_EDGE_KEY = st.tuples(_TYPE_NAME, _TYPE_NAME, _TYPE_NAME).map("__".join)
_BAD_TYPE_NAME = st.one_of(
    st.sampled_from(["field__of", "paper_", "_paper", "1paper", "pa per", "paper\n", "a-b", ""]),
    st.integers(64, 70).map(lambda n: "p" * n),
)
_BAD_EDGE_KEY = st.one_of(
    st.sampled_from(
        ["author__writes", "a__b__c__d", "author___writes__paper", "a__b__c_", "a__b__", "x"]
    ),
    st.tuples(_TYPE_NAME, _BAD_TYPE_NAME.filter(bool), _TYPE_NAME).map("__".join),
    st.integers(64, 70).map(lambda n: f"a__{'r' * n}__b"),
)


def _fanouts(keys: st.SearchStrategy[str], layers: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(keys, st.just([5] * layers), min_size=1, max_size=3)


def hetero_rules() -> list[FieldRule]:
    """Heterogeneous datasets: bad type names and keys, and the cross-field (CEL) rules."""
    files = "spec/dataset"
    two = [("spec/model/numLayers", 2), ("spec/model/fanout", [5, 5])]
    return [
        FieldRule(
            "spec.dataset.hetero.targetNodeType",
            _BAD_TYPE_NAME.map(lambda n: [*FILES_BASE, ("spec/dataset/hetero/targetNodeType", n)]),
        ),
        FieldRule(
            "spec.dataset.hetero.nodeTypes",
            _BAD_TYPE_NAME.map(
                lambda n: [*FILES_BASE, ("spec/dataset/hetero/nodeTypes", ["paper", n])]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero.nodeTypes",
            _TYPE_NAME.map(lambda n: [*FILES_BASE, ("spec/dataset/hetero/nodeTypes", [n, "p", n])]),
        ),
        FieldRule(
            "spec.dataset.hetero.edgeTypes",
            _BAD_EDGE_KEY.map(lambda k: [*FILES_BASE, ("spec/dataset/hetero/edgeTypes", [k])]),
        ),
        FieldRule(
            "spec.dataset.hetero.targetNodeType",
            st.tuples(_TYPE_NAME, st.lists(_TYPE_NAME, min_size=1, max_size=3, unique=True))
            .filter(lambda t: t[0] not in t[1])
            .map(
                lambda t: [
                    *FILES_BASE,
                    (
                        files,
                        {
                            "pyg": {"path": "g.pt"},
                            "hetero": {"targetNodeType": t[0], "nodeTypes": t[1]},
                        },
                    ),
                ]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero.edgeTypes",
            st.tuples(st.lists(_TYPE_NAME, min_size=1, max_size=3, unique=True), _EDGE_KEY)
            .filter(lambda t: not {t[1].split("__")[0], t[1].split("__")[2]} <= set(t[0]))
            .map(
                lambda t: [
                    *FILES_BASE,
                    (
                        files,
                        {"ogb": {"path": "m"}, "hetero": {"nodeTypes": t[0], "edgeTypes": [t[1]]}},
                    ),
                ]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero.edgeTypes",
            _EDGE_KEY.filter(lambda k: k.split("__")[0] != k.split("__")[2]).map(
                lambda k: [*FILES_BASE, ("spec/dataset/hetero/edgeTypes", [k, _reverse(k)])]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero",
            st.sampled_from([{}, {"targetNodeType": "node"}, {"addReverseEdges": False}]).map(
                lambda h: [*FILES_BASE, (files, {"synthetic": {}, "hetero": h})]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero",
            st.sampled_from(
                [{"nodeTypes": ["paper"]}, {"edgeTypes": ["author__writes__paper"]}]
            ).map(lambda h: [*MAG_BASE, ("spec/dataset/hetero", h)]),
        ),
        FieldRule(
            "spec.dataset.hetero.targetNodeType",
            _TYPE_NAME.filter(lambda n: n != "paper").map(
                lambda n: [*MAG_BASE, ("spec/dataset/hetero", {"targetNodeType": n})]
            ),
        ),
        FieldRule(
            "spec.dataset.syntheticMag.numClasses",
            st.floats(0.001, 0.01).map(
                lambda scale: [
                    *MAG_BASE,
                    (
                        files,
                        {"syntheticMag": {"scale": scale, "numClasses": int(736389 * scale) + 1}},
                    ),
                ]
            ),
        ),
        FieldRule(
            "spec.model.arch",
            st.sampled_from(["rsage", "rgcn"]).map(lambda a: [("spec/model/arch", a)]),
        ),
        FieldRule(
            "spec.model.arch",
            st.tuples(
                st.sampled_from([MAG_BASE, FILES_BASE]), st.sampled_from(["sage", "gcn", "gat"])
            ).map(lambda t: [*t[0], ("spec/model/arch", t[1])]),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            _fanouts(_EDGE_KEY, 3).map(lambda f: [("spec/model/edgeFanouts", f)]),
        ),
        FieldRule(
            "spec.model.embeddingDim",
            st.integers(1, 4096).map(lambda d: [("spec/model/embeddingDim", d)]),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            st.tuples(st.integers(1, 8), st.integers(1, 8), st.sampled_from(MAG_KEYS))
            .filter(lambda t: t[0] != t[1])
            .map(
                lambda t: [
                    *MAG_BASE,
                    ("spec/model/numLayers", t[0]),
                    ("spec/model/fanout", [5] * t[0]),
                    ("spec/model/edgeFanouts", {t[2]: [5] * t[1]}),
                ]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            _fanouts(_EDGE_KEY.filter(lambda k: k not in MAG_KEYS), 2).map(
                lambda f: [*MAG_BASE, *two, ("spec/model/edgeFanouts", f)]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            st.sampled_from([k for k in MAG_KEYS if "__rev_" in k]).map(
                lambda k: [
                    *MAG_BASE,
                    *two,
                    ("spec/dataset/hetero", {"addReverseEdges": False}),
                    ("spec/model/edgeFanouts", {k: [5, 5]}),
                ]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            st.tuples(
                st.lists(_EDGE_KEY, min_size=1, max_size=3, unique=True), _EDGE_KEY, st.booleans()
            )
            .filter(lambda t: t[1] not in t[0])
            .filter(lambda t: not t[2] or _reverse(t[1]) not in t[0])
            .map(
                lambda t: [
                    *FILES_BASE,
                    *two,
                    ("spec/dataset/hetero", {"edgeTypes": t[0], "addReverseEdges": t[2]}),
                    ("spec/model/edgeFanouts", {t[1]: [5, 5]}),
                ]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            _BAD_EDGE_KEY.map(lambda k: [*FILES_BASE, ("spec/model/edgeFanouts", {k: [5, 5, 5]})]),
        ),
    ]


def _reverse(key: str) -> str:
    src, rel, dst = key.split("__")
    if src == dst:
        return key
    return "__".join((dst, rel[4:] if rel.startswith("rev_") else f"rev_{rel}", src))


def link_rules() -> list[FieldRule]:
    """Link prediction: every mistake of tests/api/test_link_spec.py, and drawn ones."""
    from tests.api.test_link_spec import MISTAKES

    lp = "spec/linkPrediction"
    fractions = st.floats(0.01, 0.99)
    return [
        *(FieldRule(field, st.just([("spec", spec)])) for spec, field in MISTAKES),
        FieldRule(
            "spec.linkPrediction.split.valid",
            st.tuples(fractions, fractions)
            .filter(lambda t: t[0] + t[1] >= 1.0)
            .map(lambda t: [*LINK_BASE, (f"{lp}/split", {"valid": t[0], "test": t[1]})]),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation.hitsAt",
            st.tuples(st.integers(1, 2000), st.integers(1, 3000))
            .filter(lambda t: t[1] > t[0])
            .map(
                lambda t: [*LINK_BASE, (f"{lp}/evaluation", {"negatives": t[0], "hitsAt": [t[1]]})]
            ),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation.negatives",
            st.one_of(
                st.integers(-(2**31), 0),
                st.integers(100_001, 2**31),
                _text(1, 6).filter(lambda x: x != "all"),
            ).map(lambda n: [*LINK_BASE, (f"{lp}/evaluation/negatives", n)]),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation.negatives",
            st.floats(0.04, 10.0).map(
                lambda scale: [
                    *LINK_BASE,
                    ("spec/dataset", {"syntheticLink": {"scale": scale}}),
                    (f"{lp}/evaluation/negatives", "all"),
                ]
            ),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation.hitsAt",
            st.integers(1, 1000).map(lambda k: [*LINK_BASE, (f"{lp}/evaluation/hitsAt", [k, k])]),
        ),
        FieldRule(
            "spec.linkPrediction.edgeType",
            _EDGE_KEY.filter(lambda k: k not in MAG_KEYS).map(
                lambda k: [*MAG_BASE, *LINK_BASE[1:], (f"{lp}/edgeType", k)]
            ),
        ),
    ]


def all_rules() -> list[FieldRule]:
    from tests.integration.runnable_cases import runnable_rules

    return (
        model_field_rules()
        + kubernetes_rules()
        + cross_field_rules()
        + hetero_rules()
        + link_rules()
        + runnable_rules()
    )


def draw(strategy: st.SearchStrategy[Any], count: int, seed: int) -> list[Any]:
    """``count`` examples of a strategy (fewer if it has fewer), reproducibly for a seed."""
    out: list[Any] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(strategy)
    def collect(value: Any) -> None:
        out.append(value)

    collect()
    return out


def generate(seed: int, per_field: int, name_of: Callable[[int], str]) -> list[Case]:
    """Distinct cases: ``per_field`` draws of every field's rule, under one seed."""
    cases: list[Case] = []
    seen: set[str] = set()
    for index, rule in enumerate(all_rules()):
        for changes in draw(rule.changes, per_field, seed + index):
            key = json.dumps([rule.field, changes], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            n = len(cases)
            name = name_of(n)
            doc = manifest(name, [(p, v) for p, v in changes])
            cases.append(Case(id=f"{n:03d}-{rule.field}", field=rule.field, manifest=doc))
    return cases
