"""TTL-after-finished policy."""

from __future__ import annotations

from datetime import timedelta

from distgnn_api.spec import DistGNNJobStatus, Phase
from distgnn_operator.status.ttl_after_finished import expired, seconds_left
from tests.operator.factories import T0, make_spec

DONE = "2026-11-26T12:00:00Z"


def test_only_finished_jobs_with_a_ttl_expire() -> None:
    spec = make_spec(runPolicy={"ttlSecondsAfterFinished": 10})
    running = DistGNNJobStatus(phase=Phase.training)
    assert seconds_left(spec, running, T0) is None
    finished = DistGNNJobStatus(phase=Phase.succeeded, completion_time=DONE)
    assert seconds_left(make_spec(), finished, T0 + timedelta(days=9)) is None
    assert seconds_left(spec, finished, T0 + timedelta(seconds=4)) == 6
    assert not expired(spec, finished, T0 + timedelta(seconds=9))
    assert expired(spec, finished, T0 + timedelta(seconds=10))


def test_zero_ttl_expires_at_once_and_failed_counts() -> None:
    spec = make_spec(runPolicy={"ttlSecondsAfterFinished": 0})
    failed = DistGNNJobStatus(phase=Phase.failed, completion_time=DONE)
    assert expired(spec, failed, T0)
