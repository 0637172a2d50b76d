"""Valid DistGNNJobs generated for the same fields as tests/integration/invalid_cases.py: the
controls of the differential test, which both pydantic and the API server must accept, so that
the rules refuse only what they should."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from tests.integration.invalid_cases import Case, FieldRule, draw, manifest, node_term

_DNS = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?(\.[a-z0-9]{1,5})?\Z")
_LABEL_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")
_KEY = st.from_regex(
    r"\A([a-z0-9]{1,6}(\.[a-z]{2,3})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?\Z"
)
_LABELS = st.dictionaries(_KEY, _LABEL_VALUE, max_size=3)


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
