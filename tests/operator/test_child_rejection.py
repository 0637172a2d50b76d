"""A child the API server refuses: a Warning quoting it, a Blocked condition, retries, and at
the limit a Failed job; a retryable error changes nothing; success clears the count."""

from __future__ import annotations

from datetime import timedelta

import pytest

from distgnn_operator.reconcile.apply import ChildRejected
from distgnn_operator.reconcile.kube_api import DISTGNNJOB, EVENT, ApiError
from tests.operator.factories import T0
from tests.operator.fake_api import FakeKubeApi
from tests.operator.test_reconcile import NS, complete_partition_job, new_job, reconcile, status

INVALID = ApiError(
    422,
    "Unprocessable Entity",
    {"reason": "Invalid", "message": 'Job.batch "demo-partition" is invalid: spec.x: bad'},
)


def conditions(api: FakeKubeApi) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in status(api).get("conditions", [])}


def warnings(api: FakeKubeApi) -> list[str]:
    events = api.list(EVENT, NS, {})
    return [e["message"] for e in events if e["type"] == "Warning"]


def test_refused_child_is_reported_then_fails_the_job_at_the_limit() -> None:
    api = FakeKubeApi()
    new_job(api)
    api.refuse[("Job", "demo-partition")] = INVALID
    for attempt in (1, 2):
        with pytest.raises(ChildRejected):
            reconcile(api, T0 + timedelta(seconds=attempt), child_rejection_limit=3)
        blocked = conditions(api)["Blocked"]
        assert (blocked["status"], blocked["reason"]) == ("True", "ChildRejected")
        assert "Job demo-partition" in blocked["message"]
        assert "spec.x: bad" in blocked["message"]
        assert f"attempt {attempt} of 3" in blocked["message"]
        assert status(api)["phase"] == "Pending"
        assert status(api)["childRejections"] == attempt
        assert any("spec.x: bad" in m and f"attempt {attempt}" in m for m in warnings(api))
    result = reconcile(api, T0 + timedelta(seconds=3), child_rejection_limit=3)
    assert result.failure_reason == "ChildRejected"
    assert status(api)["phase"] == "Failed"
    failed = conditions(api)["Failed"]
    assert failed["reason"] == "ChildRejected"
    assert "refused Job demo-partition 3 times (422 Invalid)" in failed["message"]
    assert any("3 times" in m for m in warnings(api))
    # A Failed job is final: no more attempts at the child.
    writes = len(api.writes)
    reconcile(api, T0 + timedelta(seconds=4), child_rejection_limit=3)
    assert not [w for w in api.writes[writes:] if w[1] == "Job"]


@pytest.mark.parametrize("code", [409, 429, 500, 503])
def test_transient_errors_are_raised_for_a_retry_and_leave_status_alone(code: int) -> None:
    api = FakeKubeApi()
    new_job(api)
    api.refuse[("Job", "demo-partition")] = ApiError(code, "Transient", {"reason": "Conflict"})
    for second in range(6):
        with pytest.raises(ApiError):
            reconcile(api, T0 + timedelta(seconds=second), child_rejection_limit=2)
    assert status(api)["phase"] == "Pending"
    assert "Blocked" not in conditions(api)
    assert status(api).get("childRejections", 0) == 0


def test_quota_403_is_transient_and_a_forbidden_field_is_not() -> None:
    quota = ApiError(403, "Forbidden", {"message": "exceeded quota: q, requested: pods=1"})
    forbidden = ApiError(403, "Forbidden", {"message": "pods is forbidden: violates PodSecurity"})
    assert quota.retryable
    assert not forbidden.retryable
    assert not ApiError(400, "Bad Request").retryable
    assert ApiError(504, "Gateway Timeout").retryable


def test_an_accepted_child_clears_the_count_and_blocked() -> None:
    api = FakeKubeApi()
    new_job(api)
    api.refuse[("Job", "demo-partition")] = INVALID
    with pytest.raises(ChildRejected):
        reconcile(api, child_rejection_limit=3)
    del api.refuse[("Job", "demo-partition")]
    reconcile(api, T0 + timedelta(seconds=5), child_rejection_limit=3)
    assert status(api)["childRejections"] == 0
    blocked = conditions(api)["Blocked"]
    assert (blocked["status"], blocked["reason"]) == ("False", "Unblocked")
    complete_partition_job(api)
    reconcile(api, T0 + timedelta(seconds=6), child_rejection_limit=3)
    assert api.find(DISTGNNJOB, NS, "demo")["status"]["phase"] == "Training"
