"""The load benchmark's checks on job status: a trainer failure injected into a running job,
the time until the job's status shows it, and each job's status compared with the status of
one job alone.

A status is compared after :func:`normalized`: timestamps and progress dropped, conditions in
type order, and the names that differ from job to job (the job's name, its partition key)
replaced by placeholders, so two jobs in the same state have equal normalized statuses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from distgnn_operator.constants import LABEL_JOB, LABEL_ROLE
from distgnn_operator.reconcile.kube_api import DISTGNNJOB, POD, KubeApi

T = TypeVar("T")

TIMESTAMPS = ("startTime", "completionTime", "lastTransitionTime")


def normalized(job: Mapping[str, Any]) -> dict[str, Any]:
    """The job's status with what differs between equal jobs replaced or dropped."""
    status = dict(job.get("status") or {})
    name = str(job["metadata"]["name"])
    key = str((status.get("partition") or {}).get("key") or "")
    status.pop("progress", None)
    for field in TIMESTAMPS:
        status.pop(field, None)
    status["conditions"] = sorted(
        (
            {k: v for k, v in c.items() if k not in TIMESTAMPS}
            for c in status.get("conditions") or []
        ),
        key=lambda c: str(c.get("type")),
    )
    return _replace(status, [(name, "<job>"), *([(key, "<key>")] if key else [])])


def compare(jobs: list[dict[str, Any]], alone: dict[str, Any], failed: set[str]) -> dict[str, Any]:
    """Each job's normalized status against the job alone's (restarted for the failed ones)."""
    differ = []
    for job in jobs:
        name = job["metadata"]["name"]
        expected = alone["restarted"] if name in failed else alone["running"]
        got = normalized(job)
        if got != expected:
            differ.append({"job": name, "status": got, "alone": expected})
    return {"equal": not differ, "differing_jobs": len(differ), "first_difference": differ[:1]}


def _replace(value: Any, names: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in names:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {k: _replace(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, names) for v in value]
    return value


def trainer_pod(api: KubeApi, namespace: str, job: str) -> dict[str, Any] | None:
    """Trainer 0 of the job, once it is Running and Ready (kwok is done with it: a status
    written before could be overwritten by kwok's next stage)."""
    pods = api.list(POD, namespace, {LABEL_JOB: job, LABEL_ROLE: "trainer"})
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in p["status"].get("conditions") or []
        )
        and not p["metadata"].get("deletionTimestamp")
        and p["metadata"]["name"].endswith("-0")
    ]
    return running[0] if running else None


def fail_pod(api: KubeApi, pod: Mapping[str, Any]) -> None:
    """Play the kubelet: the pod's containers exited 1 and were restarted in place (what a
    failing trainer of a StatefulSet, restartPolicy Always, looks like: phase Running, the
    exit in lastState). A phase of Failed would not stay: the StatefulSet controller deletes
    a Failed pod at once and creates it again, fresh."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    statuses = [
        {
            **cs,
            "restartCount": int(cs.get("restartCount") or 0) + 1,
            "lastState": {
                "terminated": {
                    "exitCode": 1,
                    "reason": "Error",
                    "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt", now),
                    "finishedAt": now,
                }
            },
            "state": {"running": {"startedAt": now}},
        }
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    meta = pod["metadata"]
    api.patch(
        POD,
        meta["namespace"],
        meta["name"],
        {"status": {"containerStatuses": statuses}},
        subresource="status",
    )


def failure_seen(api: KubeApi, namespace: str, job: str, restarts: int) -> bool:
    """The job's status counts one more gang restart than before."""
    return restarts_of(api, namespace, job) > restarts


def poll(what: str, probe: Callable[[], T | None], timeout: float, every: float = 0.05) -> T:
    """The probe's first answer that is not None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        time.sleep(every)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def restarts_of(api: KubeApi, namespace: str, job: str) -> int:
    found = api.get(DISTGNNJOB, namespace, job) or {}
    return int((found.get("status") or {}).get("restarts") or 0)


def time_failures(
    api: KubeApi, namespace: str, jobs: list[str], timeout: float
) -> dict[str, float]:
    """Fail trainer 0 of each job at once; seconds from each pod's status showing the exit to
    the job's status showing the gang restart."""
    pods = {
        job: poll(
            f"trainer 0 of {job} Running", lambda j=job: trainer_pod(api, namespace, j), timeout
        )  # type: ignore[misc]
        for job in jobs
    }
    restarts = {job: restarts_of(api, namespace, job) for job in jobs}
    failed_at: dict[str, float] = {}
    for job, pod in pods.items():
        fail_pod(api, pod)
        failed_at[job] = time.monotonic()
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(jobs):
        if time.monotonic() > deadline:
            missing = sorted(set(jobs) - set(seen))
            raise TimeoutError(f"no gang restart in the status of {missing} in {timeout:.0f}s")
        for job in jobs:
            if job not in seen and failure_seen(api, namespace, job, restarts[job]):
                seen[job] = round(time.monotonic() - failed_at[job], 3)
        time.sleep(0.05)
    return seen
