"""Rules written twice on purpose: once as CEL for the CRD, once in Python for local checks.

A :class:`CelRule` keeps both forms and one message side by side. The CRD generator copies
the CEL form into ``x-kubernetes-validations``; the models run the Python form, so that
``distgnn validate`` and ``kubectl apply`` refuse the same documents with the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CelRule:
    """A rule: its CEL form for the CRD and its Python form for local checks."""

    rule: str
    message: str
    field_path: str | None
    check: Callable[[Any], bool]


def cel(rule: str, message: str, field_path: str | None, check: Callable[[Any], bool]) -> CelRule:
    """A rule; field_path (e.g. '.numEdges') names the field the API server reports."""
    return CelRule(rule=rule, message=message, field_path=field_path, check=check)


def rules_extra(rules: tuple[CelRule, ...]) -> dict[str, Any]:
    """The ``x-kubernetes-validations`` of a schema node."""
    return {
        "x-kubernetes-validations": [
            {"rule": r.rule, "message": r.message}
            | ({"fieldPath": r.field_path} if r.field_path else {})
            for r in rules
        ]
    }


def enforce(obj: Any, rules: tuple[CelRule, ...]) -> None:
    """Raise ValueError('<field>: <message>') for the first rule the object breaks."""
    for rule in rules:
        if not rule.check(obj):
            if rule.field_path:
                raise ValueError(f"{rule.field_path.lstrip('.')}: {rule.message}")
            raise ValueError(rule.message)
