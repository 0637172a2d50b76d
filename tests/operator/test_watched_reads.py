"""Reads answered from the watches: a reconcile through WatchedReads writes what a reconcile
straight to the API server writes, with fewer reads; the memo of what depends on the spec
alone; and the FailedCreate Events read only while a controller is short of pods."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from distgnn_api.contract import Role
from distgnn_api.spec import SpecError
from distgnn_operator.builders import JobContext, build_config_map, build_statefulset
from distgnn_operator.constants import LABEL_JOB
from distgnn_operator.reconcile.apply import ChildConflict
from distgnn_operator.reconcile.kube_api import (
    CONFIG_MAP,
    POD,
    PVC,
    STATEFULSET,
)
from distgnn_operator.reconcile.spec_memo import SpecMemo
from distgnn_operator.reconcile.state_machine import reconcile_job
from distgnn_operator.reconcile.watched import WATCHED_KINDS, WatchedChildren, WatchedReads
from distgnn_operator.status import capacity_policy
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import (
    NS,
    new_job,
    options,
    reconcile,
    to_training,
)


def watch(api: FakeKubeApi, job: str = "demo") -> WatchedChildren:
    """What the operator's indexes hold for the job: every watched object with its label."""
    objects = [
        (kind, copy.deepcopy(obj))
        for (plural, ns, _), obj in api.objects.items()
        for kind in WATCHED_KINDS
        if kind.plural == plural
        and ns == NS
        and (obj["metadata"].get("labels") or {}).get(LABEL_JOB) == job
    ]
    return WatchedChildren.of(NS, job, objects)


def controllers_made_their_pods(api: FakeKubeApi) -> None:
    for name in ("demo-sampler", "demo-trainer"):
        sts = api.find(STATEFULSET, NS, name)
        api.put({**sts, "status": {"replicas": sts["spec"]["replicas"]}})


def test_a_watched_reconcile_writes_the_same_and_reads_only_the_job_and_the_claim() -> None:
    direct, watched = FakeKubeApi(), FakeKubeApi()
    for api in (direct, watched):
        new_job(api)
        to_training(api)
        controllers_made_their_pods(api)
    # A pod exits 1: both reconciles restart the gang with the same writes.
    for api in (direct, watched):
        pod = api.find(POD, NS, "demo-trainer-1")
        pod["status"]["containerStatuses"][0]["state"] = {
            "terminated": {"exitCode": 1, "reason": "Error"}
        }
        api.put(pod)
        api.reads.clear()
        del api.writes[:]
    at = options(T0 + timedelta(seconds=3))
    reconcile_job(direct, NS, "demo", at)
    reconcile_job(WatchedReads(watched, watch(watched)), NS, "demo", at)
    assert watched.writes == direct.writes
    assert ("delete", "Pod", "demo-trainer-1") in watched.writes
    assert watched.objects.keys() == direct.objects.keys()
    assert sorted(set(watched.reads)) == [("get", "distgnnjobs"), ("get", "persistentvolumeclaims")]
    assert len(direct.reads) > len(watched.reads)


def test_a_child_the_watch_has_not_seen_is_read_from_the_api_server() -> None:
    api = FakeKubeApi()
    new_job(api)
    reconcile(api)
    # An empty snapshot (the watch lags): the reconcile finds the children by GET and
    # creates nothing twice.
    before = api.kinds_written("create")
    reconcile_job(WatchedReads(api, WatchedChildren(NS, "demo")), NS, "demo", options())
    assert [w for w in api.kinds_written("create") if not w.startswith("Event/")] == [
        w for w in before if not w.startswith("Event/")
    ]
    assert ("get", "configmaps") in api.reads


def test_reads_outside_the_snapshot_go_to_the_api_server() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    reads = WatchedReads(api, watch(api))
    api.reads.clear()
    assert reads.get(STATEFULSET, NS, "demo-trainer") is not None
    assert reads.list(POD, NS, {LABEL_JOB: "demo"}) == api.list(POD, NS, {LABEL_JOB: "demo"})
    assert api.reads == [("list", "pods")]  # the second list above, straight to the fake
    api.reads.clear()
    reads.get(PVC, NS, "demo-data")  # not a watched kind
    reads.get(CONFIG_MAP, "elsewhere", "demo-config")  # another namespace
    reads.list(POD, NS, {"distgnn.io/role": "trainer"})  # another selector
    assert api.reads == [("get", "persistentvolumeclaims"), ("get", "configmaps"), ("list", "pods")]


def test_failed_create_events_are_read_only_while_a_controller_is_short_of_pods() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    controllers_made_their_pods(api)
    api.reads.clear()
    reconcile(api, T0 + timedelta(seconds=3))
    assert ("list", "events") not in api.reads
    sts = api.find(STATEFULSET, NS, "demo-trainer")
    api.put({**sts, "status": {"replicas": 1}})
    reconcile(api, T0 + timedelta(seconds=4))
    assert ("list", "events") in api.reads


def spec_body(seed: int = 1) -> dict[str, Any]:
    return {"dataset": {"synthetic": {"numNodes": 1000, "numEdges": 4000, "seed": seed}}}


def test_spec_memo_parses_once_per_spec_content() -> None:
    memo = SpecMemo(limit=2)
    first = memo.parse(spec_body())
    assert memo.parse(copy.deepcopy(spec_body())) is first
    assert memo.parse(spec_body(seed=2)) is not first
    memo.parse(spec_body(seed=3))  # the limit drops the least recently used
    assert len(memo) == 2
    assert memo.parse(spec_body()) is not first
    with pytest.raises(SpecError):
        memo.parse({"dataset": {}})
    assert len(memo) == 2


def test_spec_memo_renders_once_per_spec_and_context() -> None:
    memo = SpecMemo()
    spec = memo.parse(spec_body())
    ctx = JobContext(name="demo", namespace=NS, uid="u1", spec=spec)
    config = memo.render(build_config_map, ctx)
    assert memo.render(build_config_map, ctx) is config
    assert config == build_config_map(ctx)
    trainer = memo.render(build_statefulset, ctx, Role.trainer)
    restarted = JobContext(name="demo", namespace=NS, uid="u1", spec=spec, restart_generation=1)
    assert memo.render(build_statefulset, restarted, Role.trainer) != trainer
    assert memo.render(build_statefulset, ctx, Role.trainer) is trainer
    # A spec the memo did not parse is rendered every time.
    other = JobContext(name="demo", namespace=NS, uid="u1", spec=copy.deepcopy(spec))
    assert memo.render(build_config_map, other) is not config
    policy = capacity_policy.CapacityPolicy.warn
    assert memo.shortfalls(spec, policy, 1 << 30) is memo.shortfalls(spec, policy, 1 << 30)


def test_a_statefulset_the_watch_lacks_is_created_unforced_and_someone_elses_is_reported() -> None:
    api = FakeKubeApi()
    new_job(api)
    to_training(api)
    # Someone else's StatefulSet under the trainers' name, without the job's label: the
    # watch does not show it, the unforced apply conflicts, and the owner is reported.
    sts = api.find(STATEFULSET, NS, "demo-trainer")
    foreign = copy.deepcopy(sts)
    foreign["metadata"]["labels"] = {}
    foreign["metadata"]["ownerReferences"] = [{"uid": "other", "controller": True}]
    api.put(foreign)
    with pytest.raises(ChildConflict):
        reconcile_job(WatchedReads(api, watch(api)), NS, "demo", options(T0))
    assert api.find(STATEFULSET, NS, "demo-trainer")["metadata"]["ownerReferences"] == [
        {"uid": "other", "controller": True}
    ]
    # Deleted, it is created again from the snapshot's absence, with no GET of it.
    del api.objects[("statefulsets", NS, "demo-trainer")]
    api.reads.clear()
    reconcile_job(WatchedReads(api, watch(api)), NS, "demo", options(T0))
    assert api.find(STATEFULSET, NS, "demo-trainer")["metadata"]["ownerReferences"]
    assert ("get", "statefulsets") not in api.reads
