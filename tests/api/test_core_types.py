"""The core Kubernetes types and name rules: each Python twin of a CEL rule fires, and the
name, label and quantity checks agree with Kubernetes' definitions on known examples."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from distgnn_api.core_types import CORE_RULES, Affinity, ResourceRequirements, Toleration
from distgnn_api.kube import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    parse_quantity,
)

BAD: dict[str, tuple[type[Any], dict[str, Any]]] = {
    "requests-names": (ResourceRequirements, {"requests": {"gpu": "1"}}),
    "limits-names": (ResourceRequirements, {"limits": {"kubernetes.io/x": "1"}}),
    "requests-le-limits": (
        ResourceRequirements,
        {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
    ),
    "extended": (ResourceRequirements, {"requests": {"example.com/fpga": "1"}}),
    "toleration-key": (Toleration, {"operator": "Equal", "value": "v"}),
    "toleration-value": (Toleration, {"key": "k", "operator": "Exists", "value": "v"}),
    "toleration-seconds": (
        Toleration,
        {"key": "k", "tolerationSeconds": 5, "effect": "NoSchedule"},
    ),
    "node-values": (
        Affinity,
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]
                }
            }
        },
    ),
    "label-values": (
        Affinity,
        {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "a", "operator": "Exists", "values": ["x"]}
                            ]
                        },
                    }
                ]
            }
        },
    ),
}


def test_every_core_rule_has_a_twin_that_fires() -> None:
    messages = {rule.message for _, rules in CORE_RULES for rule in rules}
    fired: set[str] = set()
    for case, (model, data) in BAD.items():
        with pytest.raises(ValidationError) as info:
            model.model_validate(data)
        hit = {m for m in messages if m in str(info.value)}
        assert hit, f"{case}: {info.value}"
        fired |= hit
    assert fired == messages


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("2Ki", Decimal(2048)),
        ("1e3", Decimal(1000)),
        (7, Decimal(7)),
        ("-1", Decimal(-1)),
        ("1e2.5", None),
        ("ten", None),
        (".5", Decimal("0.5")),
    ],
)
def test_parse_quantity(value: int | str, expected: Decimal | None) -> None:
    assert parse_quantity(value) == expected


def test_names() -> None:
    assert is_qualified_name("example.com/a_b.c")
    assert is_qualified_name("a")
    assert not is_qualified_name("Example.com/a")
    assert not is_qualified_name("a/b/c")
    assert not is_qualified_name("/a")
    assert not is_qualified_name("a" * 64)
    assert is_qualified_name("a" * 253 + "/b")
    assert not is_qualified_name("a" * 254 + "/b")
    assert is_label_value("")
    assert is_label_value("A.b_c-1")
    assert not is_label_value("-a")
    assert not is_label_value("a" * 64)
    assert is_dns1123_label("a-1")
    assert not is_dns1123_label("a.b")
    assert is_dns1123_subdomain("a.b-c")
    assert not is_dns1123_subdomain("A")
    assert not is_dns1123_subdomain("a" * 254)
