"""The reconcile state machine over an in-memory API: what it writes in each phase, and that a
repeated reconcile writes nothing new."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from distgnn_api.contract import Role, partition_key
from distgnn_api.spec import API_VERSION, KIND
from distgnn_operator.constants import LABEL_RESTART_GENERATION
from distgnn_operator.reconcile.apply import ChildConflict
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    DISTGNNJOB,
    EVENT,
    JOB,
    NETWORK_POLICY,
    POD,
    PVC,
    SERVICE,
    STATEFULSET,
)
from distgnn_operator.reconcile.state_machine import ReconcileOptions, reconcile_job
from distgnn_operator.reconcile.status_writes import ReconcileResult
from tests.operator.factories import T0, make_spec, raw_job, raw_pod
from tests.operator.fake_api import FakeKubeApi

NS = "ns"


def options(at: datetime = T0, **kwargs: Any) -> ReconcileOptions:
    return ReconcileOptions(clock=lambda: at, **kwargs)


def new_job(api: FakeKubeApi, name: str = "demo", **spec: Any) -> dict[str, Any]:
    body = make_spec(**spec).model_dump(mode="json", by_alias=True, exclude_none=True)
    return api.put(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": NS},
            "spec": body,
        }
    )


def reconcile(
    api: FakeKubeApi, at: datetime = T0, name: str = "demo", **kwargs: Any
) -> ReconcileResult:
    return reconcile_job(api, NS, name, options(at, **kwargs))


def status(api: FakeKubeApi, name: str = "demo") -> dict[str, Any]:
    return api.find(DISTGNNJOB, NS, name).get("status") or {}


def complete_partition_job(api: FakeKubeApi, name: str = "demo") -> None:
    job = api.find(JOB, NS, f"{name}-partition")
    api.put({**job, "status": raw_job(job["metadata"]["name"], complete=True)["status"]})


def put_pod(api: FakeKubeApi, job: str, role: Role, rank: int, **kwargs: Any) -> None:
    """Store a pod of the job's role, as its StatefulSet would."""
    pod = raw_pod(job, role, rank, **kwargs)
    pod["metadata"].update(namespace=NS)
    api.put({"apiVersion": "v1", "kind": "Pod", **pod})


def put_pods(api: FakeKubeApi, generation: int = 0, **kwargs: Any) -> None:
    for role in (Role.sampler, Role.trainer):
        for rank in range(2):
            put_pod(api, "demo", role, rank, generation=generation, **kwargs)


def to_training(api: FakeKubeApi) -> None:
    reconcile(api)
    complete_partition_job(api)
    reconcile(api, T0 + timedelta(seconds=1))
    put_pods(api)
    reconcile(api, T0 + timedelta(seconds=2))


def test_first_reconcile_creates_policy_config_claim_and_partition_job() -> None:
    api = FakeKubeApi()
    new_job(api)
    result = reconcile(api)
    assert result.phase is not None
    assert result.phase.value == "Pending"
    created = [w for w in api.kinds_written("create") if not w.startswith("Event/")]
    # The NetworkPolicy exists before any pod of the job, the partition pod included.
    assert created == [
        "NetworkPolicy/demo-isolation",
        "ConfigMap/demo-config",
        "PersistentVolumeClaim/demo-data",
        "Job/demo-partition",
    ]
    job_uid = api.find(DISTGNNJOB, NS, "demo")["metadata"]["uid"]
    for kind, name in ((CONFIG_MAP, "demo-config"), (JOB, "demo-partition")):
        (ref,) = api.find(kind, NS, name)["metadata"]["ownerReferences"]
        assert (ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (job_uid, True, True)
    assert "ownerReferences" not in api.find(PVC, NS, "demo-data")["metadata"]  # Retain
    assert status(api)["phase"] == "Pending"
    assert any(w[1] == "Event" for w in api.writes)


def test_repeated_reconcile_writes_nothing_new() -> None:
    api = FakeKubeApi()
    new_job(api)
    reconcile(api)
    reconcile(api)  # Pending -> Partitioning (the Job now exists)
    before = list(api.writes)
    reconcile(api)
    assert api.writes == before


def test_partition_complete_builds_training_children_and_marks_the_claim() -> None:
    api = FakeKubeApi()
    new_job(api)
    reconcile(api)
    complete_partition_job(api)
    result = reconcile(api, T0 + timedelta(seconds=1))
    assert status(api)["phase"] == "Training"
    assert {"Service/demo-peers", "NetworkPolicy/demo-isolation"} <= set(
        api.kinds_written("create")
    )
    assert api.kinds_written("apply") == ["StatefulSet/demo-sampler", "StatefulSet/demo-trainer"]
    key = status(api)["partition"]["key"]
    assert (
        api.find(PVC, NS, "demo-data")["metadata"]["annotations"][f"partitions.distgnn.io/{key}"]
        == "complete"
    )
    assert "annotate claim demo-data" in " ".join(result.actions)
    for kind, name in (
        (SERVICE, "demo-peers"),
        (NETWORK_POLICY, "demo-isolation"),
        (STATEFULSET, "demo-trainer"),
    ):
        assert api.find(kind, NS, name)["metadata"]["ownerReferences"][0]["kind"] == KIND


def test_reused_partition_creates_no_job() -> None:
    api = FakeKubeApi()
    spec = make_spec(storage={"claimName": "shared"})
    api.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "shared",
                "namespace": NS,
                "annotations": {f"partitions.distgnn.io/{partition_key(spec)}": "complete"},
            },
        }
    )
    new_job(api, storage={"claimName": "shared"})
    reconcile(api)
    assert status(api)["phase"] == "Training"
    assert status(api)["partition"]["reused"] is True
    assert api.get(JOB, NS, "demo-partition") is None
    assert api.get(PVC, NS, "demo-data") is None


def test_gang_restart_bumps_generation_and_deletes_old_pods() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    put_pod(api, "demo", Role.trainer, 1, exit_code=1)
    api.writes.clear()
    reconcile(api, T0 + timedelta(seconds=3))
    assert status(api)["restarts"] == 1
    # Status first, then the template with the new generation, then the old pods.
    verbs = [f"{v} {k}" for v, k, _ in api.writes if k != "Event"]
    assert verbs[0] == "patch/status DistGNNJob"
    assert verbs[1:3] == ["apply StatefulSet", "apply StatefulSet"]
    assert sorted(api.kinds_written("delete")) == [
        "Pod/demo-sampler-0",
        "Pod/demo-sampler-1",
        "Pod/demo-trainer-0",
        "Pod/demo-trainer-1",
    ]
    template = api.find(STATEFULSET, NS, "demo-trainer")["spec"]["template"]
    assert template["metadata"]["labels"][LABEL_RESTART_GENERATION] == "1"
    assert "GangRestart" in [o["reason"] for o in api.list(EVENT, NS, {})]


def test_success_scales_both_statefulsets_to_zero() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    put_pods(api, exit_code=0)
    reconcile(api, T0 + timedelta(seconds=3))
    assert status(api)["phase"] == "Succeeded"
    assert api.find(STATEFULSET, NS, "demo-trainer")["spec"]["replicas"] == 0
    assert api.find(STATEFULSET, NS, "demo-sampler")["spec"]["replicas"] == 0
    api.writes.clear()
    reconcile(api, T0 + timedelta(seconds=4))
    assert api.writes == []


def test_ttl_deletes_the_job() -> None:
    api = FakeKubeApi()
    new_job(api, runPolicy={"ttlSecondsAfterFinished": 5})
    to_training(api)
    put_pods(api, exit_code=0)
    result = reconcile(api, T0 + timedelta(seconds=3))
    assert result.requeue_after == 5
    assert not reconcile(api, T0 + timedelta(seconds=7)).deleted
    assert reconcile(api, T0 + timedelta(seconds=8)).deleted
    assert api.get(DISTGNNJOB, NS, "demo") is None
    assert reconcile(api, T0 + timedelta(seconds=9)).gone


def test_suspend_suspends_the_partition_job() -> None:
    api = FakeKubeApi()
    new_job(api)
    reconcile(api)
    job = api.find(DISTGNNJOB, NS, "demo")
    job["spec"]["runPolicy"]["suspend"] = True
    api.put(job)
    reconcile(api, T0 + timedelta(seconds=1))
    assert status(api)["phase"] == "Suspended"
    assert api.find(JOB, NS, "demo-partition")["spec"]["suspend"] is True


def test_child_controlled_by_another_owner_is_reported() -> None:
    api = FakeKubeApi()
    api.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "demo-config",
                "namespace": NS,
                "ownerReferences": [{"uid": "someone-else", "controller": True}],
            },
        }
    )
    new_job(api)
    with pytest.raises(ChildConflict, match="ConfigMap demo-config"):
        reconcile(api)
    assert "ChildConflict" in [e["reason"] for e in api.list(EVENT, NS, {})]


def test_orphaned_child_is_adopted() -> None:
    api = FakeKubeApi()
    api.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "demo-config", "namespace": NS},
        }
    )
    new_job(api)
    reconcile(api)
    (ref,) = api.find(CONFIG_MAP, NS, "demo-config")["metadata"]["ownerReferences"]
    assert ref["uid"] == api.find(DISTGNNJOB, NS, "demo")["metadata"]["uid"]


def test_stored_spec_the_models_reject_fails_the_job() -> None:
    api = FakeKubeApi()
    job = new_job(api)
    job["spec"]["model"]["numLayers"] = 2  # an older CRD without the fanout rule let it in
    api.put(job)
    reconcile(api)
    failed = next(c for c in status(api)["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "spec.model.fanout" in failed["message"]
    assert api.get(CONFIG_MAP, NS, "demo-config") is None


def test_pods_of_another_job_are_not_read() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    put_pod(api, "other", Role.trainer, 0, exit_code=1)  # a stranger
    reconcile(api, T0 + timedelta(seconds=3))
    assert status(api)["restarts"] == 0
    assert api.get(POD, NS, "other-trainer-0") is not None


def test_zero_ttl_writes_the_final_status_before_deleting() -> None:
    api = FakeKubeApi()
    new_job(api, runPolicy={"ttlSecondsAfterFinished": 0})
    to_training(api)
    put_pods(api, exit_code=0)
    api.writes.clear()
    assert reconcile(api, T0 + timedelta(seconds=3)).deleted
    verbs = [f"{v} {k}" for v, k, _ in api.writes if k != "Event"]
    assert verbs == ["patch/status DistGNNJob", "delete DistGNNJob"]
    events = sorted(api.list(EVENT, NS, {}), key=lambda e: int(e["metadata"]["resourceVersion"]))
    reasons = [e["reason"] for e in events]
    assert reasons.index("TrainersSucceeded") < reasons.index("TTLExpired")
