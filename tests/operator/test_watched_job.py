"""The job and its claim read from the watches: a reconcile of a job whose snapshot holds both
sends no read at all, never starts from a status older than its own last write, and reads the
job again after a write conflicts; the indexes keep only what a reconcile reads."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from distgnn_operator.constants import KOPF_PREFIX, LABEL_JOB
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    DISTGNNJOB,
    EVENT,
    JOB,
    POD,
    PVC,
    STATEFULSET,
    ApiError,
    Kind,
)
from distgnn_operator.reconcile.slim import KOPF_DIFFBASE, slim
from distgnn_operator.reconcile.state_machine import reconcile_job
from distgnn_operator.reconcile.watched import (
    WATCHED_KINDS,
    LatestSeen,
    WatchedChildren,
    WatchedReads,
)
from distgnn_operator.trigger import _reconcile_timed
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import NS, new_job, options, to_training
from tests.operator.test_watched_reads import controllers_made_their_pods

CLAIM = "demo-data"


def snapshot(api: FakeKubeApi, job: str = "demo") -> WatchedChildren:
    """What the operator's indexes hold for the job, slimmed as they keep it: its children,
    the job itself and its claim."""
    objects = [
        (kind, slim(kind, copy.deepcopy(obj)))
        for (plural, ns, _), obj in api.objects.items()
        for kind in WATCHED_KINDS
        if kind.plural == plural
        and ns == NS
        and (obj["metadata"].get("labels") or {}).get(LABEL_JOB) == job
    ]
    cached: list[tuple[Kind, dict[str, Any]]] = [
        (kind, slim(kind, copy.deepcopy(obj)))
        for kind, name in ((DISTGNNJOB, job), (PVC, CLAIM))
        if (obj := api.objects.get((kind.plural, NS, name))) is not None
    ]
    return WatchedChildren.of(NS, job, objects, cached)


def training_with_a_failed_trainer(api: FakeKubeApi, name: str = "demo-trainer-1") -> None:
    """A training job (as :func:`training` makes it) whose trainer ``name`` has just failed."""
    training(api)
    pod = api.find(POD, NS, name)
    pod["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": 1, "reason": "Error"}
    }
    api.put(pod)


def training(api: FakeKubeApi) -> None:
    new_job(api)
    to_training(api)
    controllers_made_their_pods(api)
    api.reads.clear()
    del api.writes[:]


def test_a_reconcile_with_the_job_and_claim_watched_reads_nothing_and_writes_the_same() -> None:
    direct, watched = FakeKubeApi(), FakeKubeApi()
    for api in (direct, watched):
        training_with_a_failed_trainer(api)
    at = options(T0 + timedelta(seconds=3))
    reconcile_job(direct, NS, "demo", at)
    reconcile_job(WatchedReads(watched, snapshot(watched), LatestSeen()), NS, "demo", at)
    assert ("delete", "Pod", "demo-trainer-1") in watched.writes
    assert watched.writes == direct.writes
    assert watched.reads == []
    assert ("get", "distgnnjobs") in direct.reads


def test_the_status_a_reconcile_wrote_is_the_previous_one_of_the_next_though_the_watch_lags() -> (
    None
):
    api = FakeKubeApi()
    training_with_a_failed_trainer(api)
    lagging = snapshot(api)  # the watch shows neither the status write nor the deletions
    latest = LatestSeen()
    at = options(T0 + timedelta(seconds=3))
    first = reconcile_job(WatchedReads(api, lagging, latest), NS, "demo", at)
    assert first.status_written
    assert first.restarts == 1
    assert latest.holds(DISTGNNJOB, NS, "demo")
    # The next reconcile, on the same lagging snapshot, starts from the written status: the
    # restart is not decided a second time, and its status write does not conflict.
    del api.writes[:]
    second = reconcile_job(WatchedReads(api, lagging, latest), NS, "demo", at)
    assert second.restarts == 1
    assert api.reads == []
    # Once the watch shows the job as new, the kept copy goes.
    WatchedReads(api, snapshot(api), latest).get(DISTGNNJOB, NS, "demo")
    assert not latest.holds(DISTGNNJOB, NS, "demo")


def test_kopfs_own_patches_of_the_job_do_not_conflict_with_the_status_write() -> None:
    api = FakeKubeApi()
    training_with_a_failed_trainer(api)
    stale = snapshot(api)
    # kopf adds its finalizer and annotations after the snapshot: the job's version moves,
    # its status does not, and the status write goes through without reading the job again.
    job = api.find(DISTGNNJOB, NS, "demo")
    meta = job["metadata"]
    api.put(
        {
            **job,
            "metadata": {
                **meta,
                "finalizers": ["distgnn.io/kopf-finalizer"],
                "annotations": {f"{KOPF_PREFIX}/demo-handler": "{}"},
            },
        }
    )
    result = reconcile_job(
        WatchedReads(api, stale, LatestSeen()), NS, "demo", options(T0 + timedelta(seconds=3))
    )
    assert result.status_written
    assert result.restarts == 1
    assert api.reads == []
    assert api.find(DISTGNNJOB, NS, "demo")["metadata"]["finalizers"]


def test_a_write_that_conflicts_reads_the_job_again() -> None:
    api = FakeKubeApi()
    training_with_a_failed_trainer(api)
    stale = snapshot(api)
    # Someone else writes the job's status after the snapshot: the status write conflicts,
    # so a stale status never overwrites a newer one.
    job = api.find(DISTGNNJOB, NS, "demo")
    api.put({**job, "status": {**job["status"], "restarts": 0, "childRejections": 1}})
    at = options(T0 + timedelta(seconds=3))
    with pytest.raises(ApiError) as raised:
        reconcile_job(WatchedReads(api, stale, LatestSeen()), NS, "demo", at)
    assert raised.value.conflict
    api.reads.clear()
    result = _reconcile_timed(WatchedReads(api, stale, LatestSeen()), NS, "demo", at)
    assert result.status_written
    assert result.restarts == 1
    assert ("get", "distgnnjobs") in api.reads


def test_a_claim_the_watch_lacks_is_read_from_the_api_server() -> None:
    api = FakeKubeApi()
    training(api)
    watched = snapshot(api)
    without_claim = WatchedChildren(
        NS, "demo", watched.objects, {k: v for k, v in watched.cached.items() if k[0] != PVC.plural}
    )
    reconcile_job(WatchedReads(api, without_claim, LatestSeen()), NS, "demo", options(T0))
    assert api.reads == [("get", "persistentvolumeclaims")]


def test_latest_seen_takes_the_newer_and_leaves_incomparable_versions_to_the_api_server() -> None:
    latest = LatestSeen()

    def job(version: str) -> dict[str, Any]:
        return {"metadata": {"namespace": NS, "name": "demo", "resourceVersion": version}}

    assert latest.pick(DISTGNNJOB, NS, "demo", job("5")) == job("5")
    latest.note(DISTGNNJOB, job("7"))
    latest.note(DISTGNNJOB, job("6"))  # an older answer does not replace a newer one
    assert latest.pick(DISTGNNJOB, NS, "demo", job("5")) == job("7")
    assert latest.pick(DISTGNNJOB, NS, "demo", job("8")) == job("8")
    assert len(latest) == 0
    latest.note(DISTGNNJOB, job("a1"))
    assert latest.pick(DISTGNNJOB, NS, "demo", job("5")) is None
    latest.note(DISTGNNJOB, job("9"))
    assert latest.pick(DISTGNNJOB, NS, "demo", None) is None  # gone from the watch
    assert len(latest) == 0
    latest.note(EVENT, job("1"))  # jobs, claims and the watched children only
    assert len(latest) == 0


def test_a_child_a_reconcile_wrote_counts_until_the_watch_shows_it_or_it_is_too_old() -> None:
    api = FakeKubeApi()
    new_job(api)
    now = [0.0]
    latest = LatestSeen(child_ttl=15.0, clock=lambda: now[0])
    empty = snapshot(api)  # the watch shows the job and its claim, no child yet
    reconcile_job(WatchedReads(api, empty, latest), NS, "demo", options(T0))
    assert api.kinds_written("create")[-1] == "Job/demo-partition"
    assert latest.holds(JOB, NS, "demo-partition")
    # The next reconcile's snapshot still lacks the children (the watch lags): it creates
    # none of them again, and reads none of them from the API server.
    del api.writes[:]
    api.reads.clear()
    reconcile_job(WatchedReads(api, empty, latest), NS, "demo", options(T0))
    assert [w for w in api.writes if w[1] != "Event"] == [("patch/status", "DistGNNJob", "demo")]
    children = {"jobs", "configmaps", "networkpolicies"}
    assert [r for r in api.reads if r[1] in children] == []
    # Once the watch shows a child, the kept copy goes.
    WatchedReads(api, snapshot(api), latest).get(JOB, NS, "demo-partition")
    assert not latest.holds(JOB, NS, "demo-partition")
    # A child the watch never showed counts for child_ttl seconds only: then the reconcile
    # finds it as before (its create answers AlreadyExists, and it is read and adopted).
    now[0] = 16.0
    del api.writes[:]
    reconcile_job(WatchedReads(api, empty, latest), NS, "demo", options(T0))
    assert ("get", "configmaps") in api.reads
    assert "ConfigMap/demo-config" not in api.kinds_written("create")


def test_slim_drops_templates_data_and_managed_fields_and_keeps_what_is_read() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    managed = {"managedFields": [{"manager": "x"}]}
    sts = api.find(STATEFULSET, NS, "demo-trainer")
    slim_sts = slim(STATEFULSET, {**sts, "metadata": {**sts["metadata"], **managed}})
    assert "template" not in slim_sts["spec"]
    assert "managedFields" not in slim_sts["metadata"]
    assert slim_sts["spec"]["replicas"] == sts["spec"]["replicas"]
    assert slim_sts["metadata"]["annotations"] == sts["metadata"]["annotations"]
    full = api.find(JOB, NS, "demo-partition")
    part = slim(JOB, full)
    assert "template" in full["spec"]
    assert part["spec"] == {k: v for k, v in full["spec"].items() if k != "template"}
    assert "data" not in slim(CONFIG_MAP, api.find(CONFIG_MAP, NS, "demo-config"))
    pod = api.find(POD, NS, "demo-trainer-0")
    slim_pod = slim(POD, pod)
    assert slim_pod["status"] == pod["status"]
    assert slim_pod["spec"] == {
        "containers": [{"name": c["name"]} for c in pod["spec"]["containers"]]
    }
    job = api.find(DISTGNNJOB, NS, "demo")
    kept = {f"{KOPF_PREFIX}/other": "1"}
    annotated = {
        **job,
        "metadata": {**job["metadata"], "annotations": {KOPF_DIFFBASE: "{}", **kept}},
    }
    assert slim(DISTGNNJOB, annotated)["metadata"]["annotations"] == kept
    assert slim(DISTGNNJOB, annotated)["spec"] == job["spec"]
