"""Conditions follow jobset's updateCondition rules."""

from __future__ import annotations

from distgnn_api.spec import Condition
from distgnn_operator.constants import COND_FAILED, COND_SUCCEEDED, COND_SUSPENDED, COND_TRAINING
from distgnn_operator.status.conditions import find, is_true, set_condition

T1, T2 = "2026-11-26T12:00:00Z", "2026-11-26T12:05:00Z"


def test_new_condition_is_appended_with_the_time() -> None:
    conds = set_condition([], COND_TRAINING, "True", "TrainersStarting", "0/2 ready", T1)
    assert conds == [
        Condition(
            type=COND_TRAINING,
            status="True",
            reason="TrainersStarting",
            message="0/2 ready",
            last_transition_time=T1,
        )
    ]


def test_reason_or_message_change_keeps_the_transition_time() -> None:
    conds = set_condition([], COND_TRAINING, "True", "TrainersStarting", "0/2 ready", T1)
    conds = set_condition(conds, COND_TRAINING, "True", "TrainersRunning", "2/2 ready", T2)
    (cond,) = conds
    assert (cond.reason, cond.message, cond.last_transition_time) == (
        "TrainersRunning",
        "2/2 ready",
        T1,
    )


def test_status_change_sets_a_new_transition_time() -> None:
    conds = set_condition([], COND_SUSPENDED, "True", "JobSuspended", "", T1)
    conds = set_condition(conds, COND_SUSPENDED, "False", "JobResumed", "", T2)
    cond = find(conds, COND_SUSPENDED)
    assert cond is not None
    assert (cond.status, cond.reason, cond.last_transition_time) == ("False", "JobResumed", T2)


def test_setting_true_flips_exclusive_conditions() -> None:
    conds = set_condition([], COND_TRAINING, "True", "TrainersRunning", "", T1)
    conds = set_condition(conds, COND_SUSPENDED, "True", "JobSuspended", "suspended", T2)
    assert is_true(conds, COND_SUSPENDED)
    training = find(conds, COND_TRAINING)
    assert training is not None
    assert (training.status, training.reason, training.last_transition_time) == (
        "False",
        "JobSuspended",
        T2,
    )
    conds = set_condition(conds, COND_SUCCEEDED, "True", "TrainersSucceeded", "", T2)
    assert not is_true(conds, COND_FAILED)
    assert [c.type for c in conds] == [COND_TRAINING, COND_SUSPENDED, COND_SUCCEEDED]


def test_setting_false_flips_nothing_and_repeats_change_nothing() -> None:
    conds = set_condition([], COND_TRAINING, "True", "TrainersRunning", "", T1)
    again = set_condition(conds, COND_TRAINING, "True", "TrainersRunning", "", T2)
    assert again == conds
    conds = set_condition(conds, COND_FAILED, "False", "NotYet", "", T2)
    assert is_true(conds, COND_TRAINING)
