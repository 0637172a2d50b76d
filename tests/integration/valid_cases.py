"""Valid DistGNNJobs generated for the same fields as tests/integration/invalid_cases.py: the
controls of the differential test, which both pydantic and the API server must accept, so that
the rules refuse only what they should."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.integration.invalid_cases import (
    MAG_BASE,
    MAG_KEYS,
    Case,
    FieldRule,
    draw,
    manifest,
    node_term,
)
from tests.integration.runnable_cases import runnable_valid_rules

_DNS = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?(\.[a-z0-9]{1,5})?\Z")
_LABEL_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")
_KEY = st.from_regex(
    r"\A([a-z0-9]{1,6}(\.[a-z]{2,3})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?\Z"
)
_LABELS = st.dictionaries(_KEY, _LABEL_VALUE, max_size=3)


_TYPE = st.from_regex(r"\A[A-Za-z](_?[A-Za-z0-9]){0,8}\Z")
_LONG_TYPE = st.from_regex(r"\A[a-z](_?[a-z0-9]){20,30}\Z").filter(lambda n: len(n) <= 63)


def _reverse(key: str) -> str:
    src, rel, dst = key.split("__")
    return "__".join((dst, rel[4:] if rel.startswith("rev_") else f"rev_{rel}", src))


def hetero_valid_rules() -> list[FieldRule]:
    """Heterogeneous jobs both sides must accept: typed datasets, fanouts per edge type."""

    def mag_job(t: tuple[int, list[str], str, int]) -> list[tuple[str, Any]]:
        layers, keys, arch, dim = t
        return [
            *MAG_BASE,
            ("spec/model/arch", arch),
            ("spec/model/numLayers", layers),
            ("spec/model/fanout", [10] * layers),
            ("spec/model/edgeFanouts", {k: [3] * layers for k in keys}),
            ("spec/model/embeddingDim", dim),
        ]

    def files_job(t: tuple[list[str], bool, bool, str]) -> list[tuple[str, Any]]:
        relations, reverse, ogb, target = t
        nodes = sorted({n for k in relations for n in (k.split("__")[0], k.split("__")[2])})
        keys = relations + ([_reverse(k) for k in relations] if reverse else [])
        source = {"ogb": {"path": "datasets/mag"}} if ogb else {"pyg": {"path": "mag.pt"}}
        hetero = {
            "targetNodeType": nodes[0] if target == "first" else None,
            "nodeTypes": nodes,
            "edgeTypes": relations,
            "addReverseEdges": reverse,
        }
        return [
            ("spec/dataset", {**source, "hetero": {k: v for k, v in hetero.items() if v}}),
            ("spec/model/arch", "rsage"),
            ("spec/model/numLayers", 2),
            ("spec/model/fanout", [5, 5]),
            ("spec/model/edgeFanouts", {k: [2, 1] for k in keys}),
        ]

    relation = st.tuples(_TYPE, _TYPE, _TYPE).map("__".join)
    return [
        FieldRule(
            "spec.model.edgeFanouts",
            st.tuples(
                st.integers(1, 8),
                st.lists(st.sampled_from(MAG_KEYS), max_size=7, unique=True),
                st.sampled_from(["rsage", "rgcn"]),
                st.integers(1, 4096),
            ).map(mag_job),
        ),
        FieldRule(
            "spec.dataset.hetero",
            st.tuples(
                st.lists(relation, min_size=1, max_size=4, unique=True),
                st.booleans(),
                st.booleans(),
                st.sampled_from(["first", "unset"]),
            )
            .filter(lambda t: not t[1] or not any(_reverse(k) in t[0] for k in t[0]))
            .map(files_job),
        ),
        FieldRule(
            "spec.dataset.hetero",
            st.tuples(_LONG_TYPE, _LONG_TYPE).map(
                lambda t: [
                    ("spec/dataset", {"pyg": {"path": "g.pt"}, "hetero": {"targetNodeType": t[0]}}),
                    ("spec/model/arch", "rgcn"),
                    ("spec/model/edgeFanouts", {f"{t[0]}__{t[1]}__{t[0]}": [1, 2, 3]}),
                ]
            ),
        ),
        FieldRule(
            "spec.dataset.hetero.edgeTypes",
            st.lists(relation, min_size=1, max_size=3, unique=True).map(
                lambda rels: [
                    *MAG_BASE,
                    (
                        "spec/dataset",
                        {
                            "pyg": {"path": "g.pt"},
                            "hetero": {
                                "edgeTypes": sorted(set(rels) | {_reverse(k) for k in rels}),
                                "addReverseEdges": False,
                            },
                        },
                    ),
                ]
            ),
        ),
        FieldRule(
            "spec.dataset.syntheticMag",
            st.tuples(st.floats(0.001, 10.0), st.integers(2, 349)).map(
                lambda t: [
                    *MAG_BASE,
                    ("spec/dataset/syntheticMag", {"scale": t[0], "numClasses": t[1]}),
                    ("spec/dataset/hetero", {"targetNodeType": "paper", "addReverseEdges": False}),
                ]
            ),
        ),
    ]


def valid_rules() -> list[FieldRule]:
    """Values both sides must accept: controls that the rules refuse only what they should."""
    host = "kubernetes.io/hostname"
    node_expr = st.one_of(
        st.tuples(st.sampled_from(["In", "NotIn"]), st.lists(_LABEL_VALUE, min_size=1, max_size=3)),
        st.tuples(st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
        st.tuples(st.sampled_from(["Gt", "Lt"]), st.integers(-100, 100).map(lambda n: [str(n)])),
    ).map(
        lambda t: {"key": "example.com/k", "operator": t[0], **({"values": t[1]} if t[1] else {})}
    )
    resources = st.one_of(
        st.integers(1, 64).map(lambda n: {"requests": {"cpu": str(n)}}),
        st.integers(1, 64).map(lambda n: {"limits": {"memory": f"{n}Gi"}}),
        st.integers(1, 64).map(lambda n: {"requests": {"cpu": f"{n}00m"}, "limits": {"cpu": n}}),
        st.integers(1, 8).map(
            lambda n: {"requests": {"example.com/fpga": n}, "limits": {"example.com/fpga": str(n)}}
        ),
    )
    toleration = st.one_of(
        st.just({"operator": "Exists"}),
        st.tuples(_KEY, _LABEL_VALUE).map(lambda t: {"key": t[0], "value": t[1]}),
        st.integers(0, 600).map(
            lambda s: {
                "key": "k",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": s,
            }
        ),
    )
    return [
        FieldRule(
            "metadata.name",
            st.from_regex(r"\A[a-z][-a-z0-9]{0,42}[a-z0-9]\Z").map(
                lambda n: [("metadata/name", n)]
            ),
        ),
        FieldRule(
            "spec.trainers.resources", resources.map(lambda r: [("spec/trainers/resources", r)])
        ),
        FieldRule(
            "spec.partition.resources", resources.map(lambda r: [("spec/partition/resources", r)])
        ),
        FieldRule(
            "spec.scheduling.tolerations",
            st.lists(toleration, max_size=3).map(lambda t: [("spec/scheduling/tolerations", t)]),
        ),
        FieldRule(
            "spec.scheduling.affinity",
            node_expr.map(lambda e: [("spec/scheduling/affinity", node_term(e))]),
        ),
        FieldRule(
            "spec.scheduling.affinity",
            st.tuples(
                _LABELS,
                st.integers(1, 100),
                st.lists(_DNS.filter(lambda s: "." not in s), max_size=2),
            ).map(
                lambda t: [
                    (
                        "spec/scheduling/affinity",
                        {
                            "podAntiAffinity": {
                                "preferredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "weight": t[1],
                                        "podAffinityTerm": {
                                            "topologyKey": host,
                                            "labelSelector": {"matchLabels": t[0]},
                                            "namespaces": t[2],
                                        },
                                    }
                                ]
                            }
                        },
                    )
                ]
            ),
        ),
        FieldRule(
            "spec.scheduling.nodeSelector",
            _LABELS.map(lambda m: [("spec/scheduling/nodeSelector", m)]),
        ),
        FieldRule("spec.scheduling.labels", _LABELS.map(lambda m: [("spec/scheduling/labels", m)])),
        FieldRule(
            "spec.scheduling.priorityClassName",
            _DNS.map(lambda n: [("spec/scheduling/priorityClassName", n)]),
        ),
        FieldRule("spec.storage.claimName", _DNS.map(lambda n: [("spec/storage/claimName", n)])),
        FieldRule(
            "spec.storage.size",
            st.one_of(
                st.integers(1, 10**12), st.integers(1, 999).map(lambda n: f"{n}Gi"), st.just("1e3")
            ).map(lambda s: [("spec/storage/size", s)]),
        ),
        FieldRule(
            "spec.images.cpu",
            st.sampled_from(["busybox", "ghcr.io/a/b:1.0", "r.io/x@sha256:" + "a" * 64]).map(
                lambda i: [("spec/images/cpu", i)]
            ),
        ),
        FieldRule(
            "spec.networkPolicy",
            st.just(
                [
                    (
                        "spec/networkPolicy",
                        {"monitoringNamespaceSelector": {}, "allowAllNamespaces": True},
                    )
                ]
            ),
        ),
        FieldRule(
            "spec.metricsPort",
            st.integers(1024, 65535)
            .filter(lambda p: p not in (29400, 29500))
            .map(lambda p: [("spec/metricsPort", p)]),
        ),
        FieldRule(
            "spec.dataset.ogb.path",
            st.lists(
                st.sampled_from(["a", "b.c", "x..y", "..a", "d_e"]), min_size=1, max_size=3
            ).map(lambda p: [("spec/dataset", {"ogb": {"path": "/".join(p)}})]),
        ),
        *hetero_valid_rules(),
        *link_valid_rules(),
        *runnable_valid_rules(),
    ]


def link_valid_rules() -> list[FieldRule]:
    """Link-prediction jobs both sides must accept: those of tests/api/test_link_spec.py, and
    drawn splits and evaluations."""
    from tests.api.test_link_spec import VALID_JOBS

    lp = "spec/linkPrediction"
    base = [("spec/dataset", {"syntheticLink": {"scale": 0.001}}), ("spec/task", "linkPrediction")]
    return [
        *(FieldRule("spec.linkPrediction", st.just([("spec", spec)])) for spec in VALID_JOBS),
        FieldRule(
            "spec.linkPrediction.split",
            st.tuples(st.floats(0.01, 0.45), st.floats(0.01, 0.45)).map(
                lambda t: [*base, (lp, {"split": {"valid": t[0], "test": t[1]}})]
            ),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation",
            st.tuples(
                st.integers(1, 100_000), st.lists(st.integers(1, 100), min_size=1, unique=True)
            ).map(
                lambda t: [
                    *base,
                    (
                        lp,
                        {
                            "evaluation": {
                                "negatives": max(t[0], max(t[1])),
                                "hitsAt": t[1],
                            }
                        },
                    ),
                ]
            ),
        ),
        FieldRule(
            "spec.linkPrediction.evaluation.negatives",
            st.floats(0.0001, 0.034).map(
                lambda scale: [
                    ("spec/dataset", {"syntheticLink": {"scale": scale}}),
                    ("spec/task", "linkPrediction"),
                    (lp, {"evaluation": {"negatives": "all"}}),
                ]
            ),
        ),
    ]


def generate_valid(seed: int, per_field: int) -> list[Case]:
    """Distinct valid jobs, drawn like generate()'s invalid ones."""
    cases: list[Case] = []
    seen: set[str] = set()
    for index, rule in enumerate(valid_rules()):
        for changes in draw(rule.changes, per_field, seed + 1000 + index):
            key = json.dumps(changes, sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            n = len(cases)
            doc = manifest(f"v{n:03d}", list(changes))
            cases.append(Case(id=f"valid-{n:03d}-{rule.field}", field=rule.field, manifest=doc))
    return cases
