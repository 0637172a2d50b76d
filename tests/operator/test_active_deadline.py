"""Active-deadline policy."""

from __future__ import annotations

from datetime import timedelta

from distgnn_api.spec import Phase
from distgnn_operator.status import compute_status
from distgnn_operator.status.active_deadline import exceeded, seconds_left
from tests.operator.factories import T0, make_spec, partition_done

START = "2026-11-26T12:00:00Z"


def test_no_deadline_or_no_start_never_expires() -> None:
    assert not exceeded(make_spec(), START, T0 + timedelta(days=365))
    assert seconds_left(make_spec(runPolicy={"activeDeadlineSeconds": 5}), None, T0) is None


def test_deadline_counts_from_start_time() -> None:
    spec = make_spec(runPolicy={"activeDeadlineSeconds": 60})
    assert seconds_left(spec, START, T0 + timedelta(seconds=20)) == 40
    assert not exceeded(spec, START, T0 + timedelta(seconds=59))
    assert exceeded(spec, START, T0 + timedelta(seconds=60))


def test_compute_status_fails_past_the_deadline_and_not_while_suspended() -> None:
    spec = make_spec(runPolicy={"activeDeadlineSeconds": 30})
    first = compute_status(spec, partition_done(), None, T0)
    assert first.start_time == START
    late = compute_status(spec, partition_done(), first, T0 + timedelta(seconds=31))
    assert late.phase is Phase.failed
    failed = next(c for c in late.conditions if c.type == "Failed")
    assert failed.reason == "DeadlineExceeded"
    assert "30s" in failed.message
    suspended_spec = make_spec(runPolicy={"activeDeadlineSeconds": 30, "suspend": True})
    paused = compute_status(suspended_spec, partition_done(), first, T0 + timedelta(seconds=31))
    assert paused.phase is Phase.suspended
    assert paused.start_time is None
