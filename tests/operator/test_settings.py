"""Operator settings: the retry backoff doubles up to its cap; the rejection limit is bounded;
the capacity policy and GPU memory come from the environment."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from distgnn_operator.settings import OperatorSettings


def test_retry_delay_doubles_up_to_the_cap() -> None:
    settings = OperatorSettings(retry_backoff_seconds=0.5, retry_backoff_max_seconds=3.0)
    assert [settings.retry_delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_child_rejection_limit_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISTGNN_OPERATOR_CHILD_REJECTION_LIMIT", "7")
    assert OperatorSettings().child_rejection_limit == 7
    monkeypatch.setenv("DISTGNN_OPERATOR_CHILD_REJECTION_LIMIT", "0")
    with pytest.raises(ValidationError):
        OperatorSettings()


def test_capacity_settings_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert OperatorSettings().capacity_policy.value == "warn"
    monkeypatch.setenv("DISTGNN_OPERATOR_CAPACITY_POLICY", "fail")
    monkeypatch.setenv("DISTGNN_OPERATOR_GPU_MEMORY_GIB", "141")
    settings = OperatorSettings()
    assert settings.capacity_policy.value == "fail"
    assert settings.gpu_memory == 141 * 2**30
    monkeypatch.setenv("DISTGNN_OPERATOR_CAPACITY_POLICY", "strict")
    with pytest.raises(ValidationError):
        OperatorSettings()
