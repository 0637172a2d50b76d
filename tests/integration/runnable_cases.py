"""Cases for the CEL rules that refuse a spec which cannot run: the rules the partition step
and the workload applied to the spec alone, before they were admission rules, and the Kueue
keys that must not reach the children. Each case breaks one rule and nothing else, so both
sides name its field; the valid controls sit at the edge of the same rules."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from distgnn_api.cel import CelRule
from distgnn_api.deployment import KUEUE_KEY_MESSAGE
from distgnn_api.hetero_rules import JOB_RULES as HETERO_JOB_RULES
from distgnn_api.link_rules import JOB_RULES as LINK_JOB_RULES
from tests.integration.invalid_cases import FILES_BASE, MAG_BASE, FieldRule

_NAME = st.from_regex(r"\A[a-z](_?[a-z0-9]){0,6}\Z")
_LABEL_VALUE = st.from_regex(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]{0,8})?[A-Za-z0-9])?\Z")
_KUEUE_KEY = st.one_of(
    st.sampled_from(
        [
            "kueue.x-k8s.io/queue-name",
            "kueue.x-k8s.io/priority-class",
            "kueue.x-k8s.io/job-uid",
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds",
        ]
    ),
    st.from_regex(r"\A[a-z]([-a-z0-9]{0,8}[a-z0-9])?\Z").map(lambda n: f"kueue.x-k8s.io/{n}"),
)
_OTHER_KEY = st.from_regex(r"\A([a-z0-9]{1,6}\.[a-z]{2,3}/)?[a-z]([-a-z0-9]{0,6}[a-z0-9])?\Z")
TWO_LAYERS: list[tuple[str, Any]] = [("spec/model/numLayers", 2), ("spec/model/fanout", [5, 5])]


def _with_kueue_key(field: str) -> st.SearchStrategy[list[tuple[str, Any]]]:
    """A map of ordinary keys with one of Kueue's among them."""
    return st.tuples(
        st.dictionaries(_OTHER_KEY, _LABEL_VALUE, max_size=2), _KUEUE_KEY, _LABEL_VALUE
    ).map(lambda t: [(f"spec/scheduling/{field}", {**t[0], t[1]: t[2]})])


def _declared(nodes: list[str]) -> list[tuple[str, Any]]:
    """A heterogeneous job on files that declares its node types (and no edge types)."""
    return [
        *FILES_BASE,
        ("spec/dataset/hetero", {"nodeTypes": nodes}),
        *TWO_LAYERS,
    ]


def _undeclared_key() -> st.SearchStrategy[tuple[list[str], str]]:
    """Declared node types and an edge type with one end outside them."""
    return (
        st.tuples(
            st.lists(_NAME, min_size=1, max_size=3, unique=True), _NAME, _NAME, _NAME, st.booleans()
        )
        .filter(lambda t: t[3] not in t[0])
        .map(
            lambda t: (
                t[0],
                "__".join((t[3], t[2], t[0][0]) if t[4] else (t[0][0], t[2], t[3])),
            )
        )
    )


def runnable_rules() -> list[FieldRule]:
    """Invalid cases: one per drawn example of each rule."""
    return [
        FieldRule("spec.scheduling.labels", _with_kueue_key("labels")),
        FieldRule("spec.scheduling.annotations", _with_kueue_key("annotations")),
        # one partition per holder: a multiple of the holders (which the older rule allows)
        FieldRule(
            "spec.partition.numPartitions",
            st.tuples(st.integers(1, 8), st.integers(2, 4), st.booleans()).map(
                lambda t: [
                    *MAG_BASE,
                    ("spec/samplers/replicas", 0 if t[2] else t[0]),
                    ("spec/trainers/replicas", t[0]),
                    ("spec/partition/numPartitions", t[0] * t[1]),
                ]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            _undeclared_key().map(
                lambda t: [*_declared(t[0]), ("spec/model/edgeFanouts", {t[1]: [3, 2]})]
            ),
        ),
        FieldRule(
            "spec.linkPrediction.edgeType",
            _undeclared_key().map(
                lambda t: [
                    *_declared(t[0]),
                    ("spec/task", "linkPrediction"),
                    ("spec/linkPrediction", {"edgeType": t[1]}),
                ]
            ),
        ),
    ]


def _message(rules: tuple[CelRule, ...], phrase: str) -> str:
    (found,) = [r.message for r in rules if phrase in r.message]
    return found


RULE_MESSAGES: list[str] = [
    KUEUE_KEY_MESSAGE.format(field="labels"),
    KUEUE_KEY_MESSAGE.format(field="annotations"),
    _message(HETERO_JOB_RULES, "one partition per holder"),
    _message(HETERO_JOB_RULES, "source or destination is not in dataset.hetero.nodeTypes"),
    _message(LINK_JOB_RULES, "dataset.hetero.nodeTypes does not declare"),
]
"""The message of the rule each of :func:`runnable_rules` breaks, in the same order."""


def runnable_valid_rules() -> list[FieldRule]:
    """Valid controls at the edge of the same rules."""
    declared = st.tuples(st.lists(_NAME, min_size=1, max_size=3, unique=True), _NAME).map(
        lambda t: (t[0], f"{t[0][-1]}__{t[1]}__{t[0][0]}")
    )
    return [
        FieldRule(
            "spec.scheduling.labels",
            st.dictionaries(_OTHER_KEY, _LABEL_VALUE, min_size=1, max_size=3).map(
                lambda m: [("spec/scheduling/labels", m), ("spec/scheduling/annotations", m)]
            ),
        ),
        FieldRule(
            "spec.partition.numPartitions",
            st.tuples(st.integers(1, 8), st.booleans()).map(
                lambda t: [
                    *MAG_BASE,
                    ("spec/samplers/replicas", 0 if t[1] else t[0]),
                    ("spec/trainers/replicas", t[0]),
                    ("spec/partition/numPartitions", t[0]),
                ]
            ),
        ),
        FieldRule(
            "spec.model.edgeFanouts",
            declared.map(
                lambda t: [
                    *_declared(t[0]),
                    ("spec/model/edgeFanouts", {t[1]: [3, 2]}),
                    ("spec/task", "linkPrediction"),
                    ("spec/linkPrediction", {"edgeType": t[1]}),
                ]
            ),
        ),
    ]
