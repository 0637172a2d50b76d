"""Errors on the Kueue path reach the job (the reconcile over an in-memory API): a job
without a usable Workload waits, Queued and Blocked with KueueError and a Warning Event; an
admitted job whose admission cannot be read keeps its children as they are."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from distgnn_api.spec import API_VERSION, KIND
from distgnn_operator import naming
from distgnn_operator.reconcile.kube_api import (
    DISTGNNJOB,
    EVENT,
    JOB,
    RESOURCE_FLAVOR,
    STATEFULSET,
    WORKLOAD,
    ApiError,
)
from distgnn_operator.reconcile.state_machine import ReconcileOptions, reconcile_job
from tests.operator.factories import T0, make_spec, raw_job
from tests.operator.fake_api import FakeKubeApi

NS = "ns"
QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_API = "kueue.x-k8s.io/v1beta2"


def _job(api: FakeKubeApi, labels: dict[str, str]) -> dict[str, Any]:
    body = make_spec().model_dump(mode="json", by_alias=True, exclude_none=True)
    return api.put(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "demo", "namespace": NS, "labels": labels},
            "spec": body,
        }
    )


def _reconcile(api: FakeKubeApi, seconds: int = 0) -> None:
    at = T0 + timedelta(seconds=seconds)
    reconcile_job(api, NS, "demo", ReconcileOptions(kueue=True, clock=lambda: at))


def _status(api: FakeKubeApi) -> dict[str, Any]:
    return api.find(DISTGNNJOB, NS, "demo").get("status") or {}


def _condition(api: FakeKubeApi, type_: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in _status(api).get("conditions", []) if c["type"] == type_
    ]
    assert found, _status(api)
    return found[0]


def _warnings(api: FakeKubeApi) -> list[dict[str, Any]]:
    return [e for e in api.list(EVENT, NS, {}) if e["type"] == "Warning"]


def test_a_missing_priority_class_queues_blocks_and_warns() -> None:
    api = FakeKubeApi()
    _job(api, {QUEUE: "user", "kueue.x-k8s.io/priority-class": "nosuchprio"})
    _reconcile(api)
    assert _status(api)["phase"] == "Queued"
    blocked = _condition(api, "Blocked")
    assert (blocked["status"], blocked["reason"]) == ("True", "KueueError")
    assert "WorkloadPriorityClass 'nosuchprio'" in blocked["message"]
    assert _condition(api, "Queued")["reason"] == "KueueError"
    assert [e["reason"] for e in _warnings(api)] == ["KueueError"]
    assert api.kinds_written("create") == [f"Event/{e['metadata']['name']}" for e in _warnings(api)]
    # The same error again: no new Event.
    _reconcile(api, 1)
    assert len(_warnings(api)) == 1


def test_a_workload_the_api_server_refuses_is_a_kueue_error() -> None:
    api = FakeKubeApi()
    job = _job(api, {QUEUE: "user"})
    name = naming.workload_name("demo", job["metadata"]["uid"])
    api.refuse[("Workload", name)] = ApiError(
        422, "Unprocessable Entity", {"message": "spec.queueName: Invalid value"}
    )
    _reconcile(api)
    blocked = _condition(api, "Blocked")
    assert blocked["reason"] == "KueueError"
    assert f"Workload {name}: 422 invalid: spec.queueName: Invalid value" in blocked["message"]
    assert api.get(JOB, NS, "demo-partition") is None


def test_an_admitted_job_whose_flavor_is_gone_keeps_its_children() -> None:
    api = FakeKubeApi()
    job = _job(api, {QUEUE: "user"})
    flavor = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor"}
    api.put({**flavor, "metadata": {"name": "pool", "namespace": ""}, "spec": {}})
    _reconcile(api)
    name = naming.workload_name("demo", job["metadata"]["uid"])
    workload = api.find(WORKLOAD, NS, name)
    workload["status"] = {
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "x"}
            for t in ("QuotaReserved", "Admitted")
        ],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "trainer", "flavors": {"nvidia.com/gpu": "pool"}}],
        },
    }
    api.put(workload)
    _reconcile(api, 1)
    partition = api.find(JOB, NS, "demo-partition")
    api.put({**partition, "status": raw_job("demo-partition", complete=True)["status"]})
    _reconcile(api, 2)
    trainers = api.find(STATEFULSET, NS, "demo-trainer")
    assert _status(api)["phase"] == "Training"

    del api.objects[(RESOURCE_FLAVOR.plural, "", "pool")]
    writes = len(api.writes)
    _reconcile(api, 3)
    blocked = _condition(api, "Blocked")
    assert blocked["reason"] == "KueueError"
    assert "ResourceFlavor 'pool' of the admission does not exist" in blocked["message"]
    assert _status(api)["phase"] == "Training"
    assert api.find(STATEFULSET, NS, "demo-trainer") == trainers
    touched = {k for _, k, _ in api.writes[writes:]}
    assert touched <= {"DistGNNJob", "Event"}, api.writes[writes:]
