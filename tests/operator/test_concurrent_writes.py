"""A reconcile's independent writes go together, stage by stage, and its Events go through a
queue that one thread posts: every call of a stage runs and the first failure is raised, the
NetworkPolicy, the ConfigMap and the claim are written before anything that makes pods, and
the Events are posted in order, all of them, though the queue fills or a POST fails."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from distgnn_operator.reconcile.event_queue import EventQueue, QueuedEvents
from distgnn_operator.reconcile.events import event_manifest
from distgnn_operator.reconcile.fanout import Concurrently, Fanout, in_turn
from distgnn_operator.reconcile.forwarding import ForwardingApi, T
from distgnn_operator.reconcile.kube_api import (
    DISTGNNJOB,
    EVENT,
    POD,
    ApiError,
    Kind,
    KubeApi,
    kind_of,
)
from distgnn_operator.reconcile.state_machine import reconcile_job
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import NS, complete_partition_job, new_job, options, to_training


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


class GatedApi(ForwardingApi):
    """The fake API server (``fake``) made safe for threads, whose creates, applies and status
    writes of the gated kinds wait at a barrier: they go through only when as many arrive
    together as the barrier counts."""

    def __init__(self) -> None:
        self.fake = FakeKubeApi()
        super().__init__(self.fake)
        self.lock = threading.RLock()
        self.gates: dict[str, threading.Barrier] = {}

    def _forward(self, verb: str, kind: Kind, name: str, call: Callable[[KubeApi], T]) -> T:
        gate = self.gates.get(kind.kind)
        if gate is not None and verb in ("create", "apply", "replace_status"):
            gate.wait(timeout=10)  # a broken barrier: the writes went one after another
        with self.lock:
            return super()._forward(verb, kind, name, call)

    def gate(self, *kinds: str) -> None:
        barrier = threading.Barrier(len(kinds))
        self.gates = dict.fromkeys(kinds, barrier)


def _calls(log: list[str], fail: set[str]) -> list[Callable[[], str]]:
    def call(name: str) -> str:
        log.append(name)
        if name in fail:
            raise ValueError(name)
        return name

    return [lambda n=n: call(n) for n in ("a", "b", "c")]  # type: ignore[misc]


@pytest.mark.parametrize("kind", ["in_turn", "concurrently"])
def test_every_call_runs_and_the_first_failure_in_order_is_raised(
    kind: str, pool: ThreadPoolExecutor
) -> None:
    fanout: Fanout = in_turn if kind == "in_turn" else Concurrently(pool)
    log: list[str] = []
    assert fanout(_calls(log, set())) == ["a", "b", "c"]
    log.clear()
    with pytest.raises(ValueError, match="b"):
        fanout(_calls(log, {"b", "c"}))
    assert sorted(log) == ["a", "b", "c"]
    assert fanout([]) == []


def test_a_new_job_writes_its_policy_config_and_claim_together_then_its_partition_job(
    pool: ThreadPoolExecutor,
) -> None:
    api = GatedApi()
    new_job(api.fake)
    api.gate("NetworkPolicy", "ConfigMap", "PersistentVolumeClaim")
    reconcile_job(api, NS, "demo", options(fanout=Concurrently(pool)))
    created = [w for w in api.fake.kinds_written("create") if not w.startswith("Event/")]
    assert sorted(created[:3]) == [
        "ConfigMap/demo-config",
        "NetworkPolicy/demo-isolation",
        "PersistentVolumeClaim/demo-data",
    ]
    assert created[3:] == ["Job/demo-partition"]


def test_the_training_status_the_service_and_the_statefulsets_go_together(
    pool: ThreadPoolExecutor,
) -> None:
    api = GatedApi()
    new_job(api.fake)
    reconcile_job(api, NS, "demo", options(fanout=Concurrently(pool)))
    complete_partition_job(api.fake)
    api.gate("DistGNNJob", "Service", "StatefulSet", "StatefulSet")
    at = options(T0 + timedelta(seconds=1), fanout=Concurrently(pool))
    result = reconcile_job(api, NS, "demo", at)
    assert result.phase is not None
    assert result.phase.value == "Training"
    written = {f"{verb} {kind}/{name}" for verb, kind, name in api.fake.writes}
    assert {
        "patch/status DistGNNJob/demo",
        "create Service/demo-peers",
        "apply StatefulSet/demo-sampler",
        "apply StatefulSet/demo-trainer",
    } <= written


def test_a_gang_restart_writes_its_status_before_any_pod_is_touched(
    pool: ThreadPoolExecutor,
) -> None:
    api = GatedApi()
    fake = api.fake
    new_job(fake)
    to_training(fake)
    trainer = fake.find(POD, NS, "demo-trainer-1")
    trainer["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": 1, "reason": "Error"}
    }
    fake.put(trainer)
    del fake.writes[:]
    at = options(T0 + timedelta(seconds=3), fanout=Concurrently(pool))
    result = reconcile_job(api, NS, "demo", at)
    assert result.restarts == 1
    written = [f"{verb} {kind}" for verb, kind, _ in fake.writes if kind != "Event"]
    assert written[0] == "patch/status DistGNNJob"
    assert sorted(written[1:3]) == ["apply StatefulSet", "apply StatefulSet"]
    assert set(written[3:]) == {"delete Pod"}


def _event(reason: str) -> dict[str, Any]:
    job = {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": "demo", "namespace": NS, "uid": "u"},
    }
    return event_manifest(job, "Normal", reason, f"{reason} happened", T0)


class HeldApi(FakeKubeApi):
    """Its Event POSTs wait until ``go`` is set; the POST of ``refused`` fails."""

    def __init__(self, refused: str = "") -> None:
        super().__init__()
        self.go = threading.Event()
        self.refused = refused
        self.posted: list[str] = []

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if kind_of(obj) == EVENT:
            self.go.wait(timeout=10)
            if obj["reason"] == self.refused:
                raise ApiError(403, "Forbidden")
            self.posted.append(str(obj["reason"]))
        return super().create(obj)


def test_events_are_posted_in_order_by_the_queue_and_drained_at_close() -> None:
    api = HeldApi()
    queue = EventQueue(api)
    writes = QueuedEvents(api, queue)
    for reason in ("First", "Second", "Third"):
        assert writes.create(_event(reason))["reason"] == reason  # returns at once
    assert api.posted == []
    api.go.set()
    queue.close()
    assert api.posted == ["First", "Second", "Third"]
    assert [e["reason"] for e in api.list(EVENT, NS, {})] == ["First", "Second", "Third"]


def test_a_full_queue_posts_the_event_itself_and_a_failed_post_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = HeldApi(refused="Refused")
    queue = EventQueue(api, limit=1)
    queue.put(_event("Held"))  # the thread takes it and waits for go
    while queue._queue.qsize():  # wait until the thread holds it
        threading.Event().wait(0.01)
    queue.put(_event("Queued"))  # fills the queue
    done = threading.Event()

    def overflow() -> None:
        queue.put(_event("Refused"))  # full: posted by this thread, refused, logged
        done.set()

    threading.Thread(target=overflow).start()
    with caplog.at_level(logging.WARNING):
        api.go.set()
        assert done.wait(timeout=10)
        queue.close()
    assert sorted(api.posted) == ["Held", "Queued"]
    assert "could not post event Refused on demo" in caplog.text


def test_other_writes_go_through_at_once() -> None:
    api = HeldApi()
    queue = EventQueue(api)
    writes = QueuedEvents(api, queue)
    job = new_job(api)
    updated = writes.patch(DISTGNNJOB, NS, "demo", {"metadata": {"labels": {"a": "b"}}})
    assert updated["metadata"]["labels"] == {"a": "b"}
    assert writes.get(DISTGNNJOB, NS, "demo") is not None
    assert job["metadata"]["name"] == "demo"
    api.go.set()
    queue.close()
