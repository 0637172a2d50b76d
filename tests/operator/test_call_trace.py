"""A reconcile's API requests, timed: each request with its start, length and thread, the time
in requests counted once where they overlap, and a slow reconcile logged with them."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from distgnn_operator.reconcile.call_trace import Call, CallTrace
from distgnn_operator.reconcile.event_queue import EventQueue, QueuedEvents
from distgnn_operator.reconcile.kube_api import CONFIG_MAP, EVENT
from distgnn_operator.reconcile.watched import WatchedChildren, WatchedReads
from distgnn_operator.trigger import _reconcile_timed
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import NS, new_job, options


def test_each_call_is_timed_and_overlaps_count_once() -> None:
    ticks = iter([0.0, 1.0, 1.5, 2.0, 2.25])
    api = FakeKubeApi()
    trace = CallTrace(api, clock=lambda: next(ticks))  # began at 0
    assert trace.get(CONFIG_MAP, NS, "missing") is None  # 1.0 to 1.5
    trace.list(EVENT, NS, {})  # 2.0 to 2.25
    assert [(c.verb, c.resource, c.name, c.start, c.seconds) for c in trace.calls] == [
        ("get", "configmaps", "missing", 1.0, 0.5),
        ("list", "events", "", 2.0, 0.25),
    ]
    assert trace.api_seconds() == 0.75
    trace.calls += [Call("patch", "pods", "p", 1.25, 0.5, "write-0")]  # overlaps the get
    assert trace.api_seconds() == 1.0
    line = trace.describe(3.0)
    assert line.startswith("3.000s, 1.000s in requests, 2.000s in none; 3 requests:")
    assert "get configmaps/missing at +1.000 for 0.500s" in line
    assert "patch pods/p at +1.250 for 0.500s [write-0]" in line


def test_a_slow_reconcile_is_logged_with_the_requests_it_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeKubeApi()
    new_job(api)
    trace = CallTrace(api)
    queue = EventQueue(api)
    reads = WatchedReads(QueuedEvents(trace, queue), WatchedChildren(NS, "demo"))
    at = options(T0 + timedelta(seconds=1))
    with caplog.at_level(logging.WARNING):
        _reconcile_timed(reads, NS, "demo", at, trace, slow=1e-9)
        _reconcile_timed(reads, NS, "demo", at, trace, slow=0.0)  # 0: never logged
    queue.close()
    (record,) = [r for r in caplog.records if r.getMessage().startswith("slow reconcile")]
    message = record.getMessage()
    assert message.startswith(f"slow reconcile {NS}/demo: ")
    assert "replace_status distgnnjobs/demo" in message
    assert "create networkpolicies/demo-isolation" in message
    assert "create events" not in message  # queued, not sent by the reconcile
    assert " failed" not in message
    # The second reconcile, on the same empty snapshot, creates the children again: the API
    # server answers AlreadyExists, and the trace marks those calls failed.
    assert ("create", "networkpolicies", True) in [
        (c.verb, c.resource, c.failed) for c in trace.calls
    ]
