"""Status conditions, updated by jobset's updateCondition rules.

- A new status (True/False flips) sets lastTransitionTime; a new reason or message alone keeps it.
- Setting a condition True flips the conditions exclusive with it (EXCLUSIVE_CONDITIONS) to False.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from distgnn_api.spec import Condition
from distgnn_operator.constants import EXCLUSIVE_CONDITIONS

Status = Literal["True", "False", "Unknown"]


def find(conditions: Sequence[Condition], type_: str) -> Condition | None:
    """The condition of a type, if present."""
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: Sequence[Condition], type_: str) -> bool:
    """True when the condition is present with status True."""
    cond = find(conditions, type_)
    return cond is not None and cond.status == "True"


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: Status,
    reason: str,
    message: str,
    now: str,
) -> list[Condition]:
    """The conditions with one set, following the rules in the module docstring."""
    out: list[Condition] = []
    found = False
    for cond in conditions:
        if cond.type == type_:
            found = True
            if cond.status != status:
                cond = Condition(
                    type=type_,
                    status=status,
                    reason=reason,
                    message=message,
                    last_transition_time=now,
                )
            elif (cond.reason, cond.message) != (reason, message):
                cond = cond.model_copy(update={"reason": reason, "message": message})
        elif (
            status == "True"
            and cond.status == "True"
            and cond.type in EXCLUSIVE_CONDITIONS.get(type_, frozenset())
        ):
            cond = Condition(
                type=cond.type,
                status="False",
                reason=reason,
                message=message,
                last_transition_time=now,
            )
        out.append(cond)
    if not found:
        out.append(
            Condition(
                type=type_, status=status, reason=reason, message=message, last_transition_time=now
            )
        )
    return out
