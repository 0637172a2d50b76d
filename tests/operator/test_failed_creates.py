"""The FailedCreate Events listed in the background: a reconcile takes the last LIST and never
sends one itself, the thread lists a namespace as soon as it is wanted and then every period
while a reconcile wants it, and new Events are told with the objects they are about."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, cast

from distgnn_operator.handler_state import Runtime
from distgnn_operator.reconcile import ReconcileOptions
from distgnn_operator.reconcile.event_queue import EventQueue
from distgnn_operator.reconcile.failed_creates import FailedCreates
from distgnn_operator.reconcile.kube_api import JOB, STATEFULSET
from distgnn_operator.reconcile.state_machine import reconcile_job
from distgnn_operator.reconcile.watched import WatchedReads
from distgnn_operator.settings import OperatorSettings
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import NS, new_job, options, status, to_training
from tests.operator.test_watched_reads import controllers_made_their_pods, watch


def put_event(api: FakeKubeApi, name: str, uid: str, message: str = "exceeded quota") -> None:
    api.put(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": NS},
            "involvedObject": {"uid": uid},
            "reason": "FailedCreate",
            "message": message,
            "lastTimestamp": "2026-01-01T00:00:00Z",
        }
    )


def blocked(api: FakeKubeApi) -> dict[str, Any] | None:
    return next((c for c in status(api)["conditions"] if c["type"] == "Blocked"), None)


def test_a_reconcile_takes_the_last_list_and_never_lists_events_itself() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    controllers_made_their_pods(api)
    trainer = api.find(STATEFULSET, NS, "demo-trainer")
    api.put({**trainer, "status": {"replicas": 1}})  # short of a pod
    put_event(api, "quota", trainer["metadata"]["uid"])
    lists = FailedCreates(api)
    api.reads.clear()
    at = options(T0 + timedelta(seconds=3))
    reconcile_job(WatchedReads(api, watch(api), events=lists), NS, "demo", at)
    assert ("list", "events") not in api.reads  # no LIST yet: none waited for
    assert (blocked(api) or {}).get("status") != "True"
    lists.refresh()
    assert api.reads.count(("list", "events")) == 1
    reconcile_job(WatchedReads(api, watch(api), events=lists), NS, "demo", at)
    assert api.reads.count(("list", "events")) == 1
    cond = blocked(api)
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreate")
    assert "exceeded quota" in cond["message"]


def test_new_events_are_told_once_with_the_objects_they_are_about() -> None:
    api = FakeKubeApi()
    told: list[tuple[str, set[str]]] = []
    lists = FailedCreates(api, lambda ns, uids: told.append((ns, uids)))
    assert lists.events(NS) == []
    put_event(api, "e1", "u1")
    lists.refresh()
    assert told == [(NS, {"u1"})]
    assert [e["metadata"]["name"] for e in lists.events(NS)] == ["e1"]
    lists.refresh()
    assert len(told) == 1  # nothing new
    put_event(api, "e1", "u1", "exceeded quota again")  # the count went up: a new version
    put_event(api, "e2", "u2")
    lists.refresh()
    assert told[1:] == [(NS, {"u1", "u2"})]


def test_a_namespace_no_reconcile_wants_is_no_longer_listed() -> None:
    api = FakeKubeApi()
    lists = FailedCreates(api)
    lists.refresh()
    assert api.reads == []  # nothing wanted
    lists.events(NS)
    lists.refresh()
    assert api.reads == [("list", "events")]
    put_event(api, "e1", "u1")
    forgetful = FailedCreates(api, keep=0.0)
    forgetful.events(NS)
    forgetful.refresh()  # wanted a moment ago, more than keep: forgotten, not listed
    assert api.reads == [("list", "events")]
    assert forgetful.events(NS) == []


def test_the_thread_lists_a_namespace_as_soon_as_it_is_wanted() -> None:
    api = FakeKubeApi()
    put_event(api, "e1", "u1")
    told = threading.Event()
    lists = FailedCreates(api, lambda ns, uids: told.set(), period=600.0)
    lists.start()
    try:
        assert not told.wait(0.2)  # nothing wanted, nothing listed
        lists.events(NS)
        assert told.wait(10)  # long before the period
        assert [e["metadata"]["name"] for e in lists.events(NS)] == ["e1"]
    finally:
        lists.close()


def test_the_jobs_of_the_controllers_an_event_is_about() -> None:
    api = FakeKubeApi()
    indexes = {  # kopf's indexes: (namespace, job) -> the objects
        JOB: {(NS, "a"): [{"metadata": {"uid": "job-a"}}]},
        STATEFULSET: {
            (NS, "b"): [{"metadata": {"uid": "sts-b1"}}, {"metadata": {"uid": "sts-b2"}}],
            ("other", "c"): [{"metadata": {"uid": "sts-c"}}],
        },
    }
    with ThreadPoolExecutor(max_workers=1) as pool:
        runtime = Runtime(
            settings=OperatorSettings(),
            api=api,
            executor=pool,
            options=ReconcileOptions(),
            posting=EventQueue(api),
            writers=pool,
            indexes=cast(Any, indexes),
        )
        assert runtime.jobs_owning(NS, {"job-a", "sts-b2", "sts-c", "unknown"}) == ["a", "b"]
        runtime.posting.close()
