"""benchmarks/operator_load.py's figures without a control plane: the reconcile histogram and
request counters read from /metrics text (and the share of a load run, after minus before),
the comparison of a job's status with the status of the job alone, and the profile's split of
the reconciles' API time by step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.scripts import load_script

pytestmark = pytest.mark.benchmark

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
metrics = load_script(BENCHMARKS / "operator_load_metrics.py", "operator_load_metrics", beside=True)
checks = load_script(BENCHMARKS / "operator_load_status.py", "operator_load_status")
profile = load_script(BENCHMARKS / "operator_profile.py", "operator_profile")

EXPOSITION = """\
# HELP distgnn_operator_reconcile_seconds Duration of one reconcile of one DistGNNJob.
distgnn_operator_reconcile_seconds_bucket{{le="0.01"}} {fast}
distgnn_operator_reconcile_seconds_bucket{{le="0.1"}} {mid}
distgnn_operator_reconcile_seconds_bucket{{le="+Inf"}} {all}
distgnn_operator_reconcile_seconds_count {all}
distgnn_operator_reconcile_seconds_sum {total}
distgnn_operator_api_requests_total{{resource="distgnnjobs",verb="get"}} {gets}
distgnn_operator_api_requests_total{{resource="distgnnjobs/status",verb="patch"}} {patches}
"""


def test_the_load_share_of_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    pages = iter(
        [
            EXPOSITION.format(fast=2, mid=2, all=2, total=0.01, gets=2, patches=0),
            EXPOSITION.format(fast=52, mid=100, all=102, total=3.0, gets=102, patches=25),
        ]
    )

    class Page:
        def read(self) -> bytes:
            return next(pages).encode()

    monkeypatch.setattr(metrics.urllib.request, "urlopen", lambda *a, **k: Page())
    before = metrics.scrape(1)
    during = metrics.scrape(1) - before
    assert during.count == 100
    assert during.buckets == ((0.01, 50.0), (0.1, 98.0), (float("inf"), 100.0))
    assert metrics.histogram_quantile(0.5, during.buckets) == 0.01
    assert metrics.histogram_quantile(0.99, during.buckets) == 0.1
    assert metrics.per_reconcile(during.requests, during.count)["by_verb"] == {
        "get": 1.0,
        "patch": 0.25,
    }


def job(name: str, key: str, restarts: int, stamp: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "phase": "Training",
            "restarts": restarts,
            "startTime": stamp,
            "partition": {"key": key, "path": f"partitions/{key}"},
            "conditions": [
                {"type": "Training", "reason": "TrainersRunning", "message": f"{name} up",
                 "lastTransitionTime": stamp},
                {"type": "Partitioned", "reason": "PartitionSucceeded",
                 "message": f"{name}-partition wrote partitions/{key}", "lastTransitionTime": stamp},
            ],
        },
    }  # fmt: skip


def test_a_status_is_compared_without_its_names_and_times() -> None:
    alone = {
        "running": checks.normalized(job("alone", "k0", 0, "t0")),
        "restarted": checks.normalized(job("alone", "k0", 1, "t0")),
    }
    same = job("load-001", "k1", 0, "t1")
    same["status"]["conditions"].reverse()
    restarted = job("load-002", "k2", 1, "t2")
    assert checks.normalized(same) == alone["running"]
    assert checks.compare([same, restarted], alone, {"load-002"})["equal"]
    # A failed job whose restart did not show differs.
    stuck = job("load-003", "k3", 0, "t3")
    found = checks.compare([same, stuck], alone, {"load-003"})
    assert (found["equal"], found["differing_jobs"]) == (False, 1)
    assert found["first_difference"][0]["job"] == "load-003"


def test_the_profile_splits_the_api_time_by_the_innermost_step(tmp_path: Path) -> None:
    call = "RestKubeApi._call (operator/reconcile/kube_api.py:90);select (selectors.py:1)"
    top = "_worker (concurrent/futures/thread.py:80);_reconcile_timed (operator/trigger.py:1)"
    write = f"{top};write_status (operator/reconcile/status_writes.py:60)"
    raw = tmp_path / "operator.raw"
    raw.write_text(
        f"{write};{call} 50\n"
        f"{write};record (operator/reconcile/events.py:40);{call} 25\n"
        f"{top};read_children (operator/reconcile/observe.py:70);{call} 100\n"
        f"{top};compute_status (operator/status/compute.py:10) 5\n"
    )
    found = profile.summarize(raw, 50.0)
    assert found["api_requests_by_step"] == {
        "children read": 2.0,
        "status write": 1.0,
        "Events recorded": 0.5,
    }
    assert found["seconds"]["reconcile: status computation"] == 0.1


slow = load_script(BENCHMARKS / "operator_load_slow.py", "operator_load_slow")


def test_the_slow_reconciles_are_summed_by_what_each_waited_on_most(tmp_path: Path) -> None:
    log = tmp_path / "operator.log"
    prefix = "[2026-11-27 17:00:00,000] distgnn_operator.trigger [WARNING ] slow reconcile"
    log.write_text(
        f"{prefix} ns/a: 0.600s, 0.500s in requests, 0.100s in none; 2 requests: "
        "replace_status distgnnjobs/a at +0.010 for 0.500s [reconcile_0]; "
        "apply statefulsets/a-trainer at +0.020 for 0.400s [write_1]\n"
        "an unrelated line\n"
        f"{prefix} ns/b: 0.400s, 0.100s in requests, 0.300s in none; 1 requests: "
        "create events/ at +0.300 for 0.100s [reconcile_1] failed\n"
    )
    assert slow.parse("an unrelated line") is None
    found = slow.summarize(log, 0.3)
    assert found["count"] == 2
    assert found["seconds"] == 1.0
    assert (found["share_in_requests"], found["share_in_none"]) == (0.6, 0.4)
    assert found["waited_most_on"] == {"replace_status distgnnjobs": 1, "no request": 1}
    assert found["longest_request_seconds_median"] == 0.3
    (tmp_path / "quiet.log").write_text("nothing slow\n")
    assert slow.summarize(tmp_path / "quiet.log", 0.3) == {"threshold_seconds": 0.3, "count": 0}


def test_the_profile_counts_the_failed_creates_thread_apart(tmp_path: Path) -> None:
    thread = (
        "_bootstrap (threading.py:1);FailedCreates._run (operator/reconcile/failed_creates.py:1)"
    )
    call = "RestKubeApi._call (operator/reconcile/kube_api.py:90)"
    raw = tmp_path / "operator.raw"
    raw.write_text(f"{thread};refresh (x.py:1);{call} 50\n{thread};wait (threading.py:1) 100\n")
    found = profile.summarize(raw, 50.0)
    assert found["seconds"]["failed-creates thread: api requests"] == 1.0
    assert found["seconds"]["idle: failed-creates thread"] == 2.0
    assert found["api_requests_by_step"] == {"FailedCreate Events list (its own thread)": 1.0}
