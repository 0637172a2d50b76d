"""Every panel of the Grafana dashboard against a real Prometheus scraping real processes.

A Prometheus (Debian's package) on loopback scrapes, under the chart's PodMonitor and
ServiceMonitor relabelling: ``distgnn run`` of a homogeneous and of a heterogeneous job in
worker mode and in server-client mode (CPU, gloo), and the operator running against the real control plane, where a job
partitions and a second one reuses that partition. Then every dashboard expression is
evaluated with its variables substituted, every endpoint's exposition goes through
``promtool check metrics``, and the chart's alert rules load and evaluate without error.
Each panel's last value is written to ``panels.json`` beside the test's Prometheus data
(the path is printed).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from distgnn_operator.local.job_plan import LOCAL_NAMESPACE
from tests.prometheus import dashboard as dash
from tests.prometheus.server import Prometheus, promtool
from tests.prometheus.tier_runs import (
    HETERO_JOB,
    HETERO_SERVER_JOB,
    RELEASE,
    SERVER_JOB,
    WORKER_JOB,
    TierRun,
)

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(900)]


# Panels (by id) that only one mode fills; the rest must have data for every job.
SERVER_CLIENT_ONLY = {13, 14}  # sampler requests/s and latency
HETERO_ONLY = {29, 30}  # embedding rows of featureless node types
# Typed feature caches per node type: (panel, target) -> the mode whose holders fill it.
TYPED_SAMPLERS = {(31, "A"), (32, "A"), (32, "B")}  # heterogeneous server-client mode
TYPED_TRAINERS = {(31, "B"), (32, "C"), (32, "D")}  # heterogeneous worker mode
LINK_ONLY = {33}  # MRR and Hits@K: the tier runs node-classification jobs
PARTITION_PANELS = {18, 19, 26}  # exported by the operator, for the jobs it runs
OPERATOR_PANELS = {21, 22, 23, 27, 28}
# Targets that are rightly empty in a healthy run (their panel has another target with data).
MAY_BE_EMPTY = {
    (23, "B"): "reconcile errors: none in a healthy run",
    # Set by the final evaluation just before the trainers exit: a scrape may miss it.
    (11, "B"): "full-neighbourhood accuracy",
}


def _values(prom: Prometheus, expr: str, tier: TierRun) -> dict[str, float]:
    """The last non-NaN value of each series of a range query over the whole tier."""
    out: dict[str, float] = {}
    for series in prom.query_range(expr, tier.start, tier.end):
        name = json.dumps(series["metric"], sort_keys=True)
        numbers = [float(v) for _, v in series["values"] if not math.isnan(float(v))]
        if numbers:
            out[name] = numbers[-1]
    return out


def test_every_panel_has_data(prom: Prometheus, tier: TierRun) -> None:
    report: dict[str, dict[str, float]] = {}
    empty = []
    for q in dash.queries(dash.load()):
        values = _values(prom, dash.substitute(q.expr), tier)
        report[q.name] = values
        if not values and (q.panel_id, q.ref) not in MAY_BE_EMPTY and q.panel_id not in LINK_ONLY:
            empty.append(f"{q.name}: {q.expr}")
    tier.report.write_text(json.dumps(report, indent=2))
    print(f"\npanel values (last value of each series): {tier.report}")
    for name, values in report.items():
        shown = ", ".join(f"{_legend(k)}={v:.4g}" for k, v in sorted(values.items())[:6])
        print(f"  {name}: {shown or '(empty)'}")
    assert not empty, "panels empty over the whole tier:\n" + "\n".join(empty)


def _legend(metric_json: str) -> str:
    metric = json.loads(metric_json)
    return ",".join(f"{k}={v}" for k, v in sorted(metric.items())) or "{}"


def test_panels_per_mode(prom: Prometheus, tier: TierRun) -> None:
    """Per job: the sampler panels are empty only in worker mode; the embedding panels have
    data for the heterogeneous jobs only; the feature-cache panel for the homogeneous jobs
    only, the typed feature-cache panels for the heterogeneous ones (their samplers' series
    in server-client mode, their trainers' in worker mode); every other workload panel has
    data for every local job; the partition panels for the operator's jobs, reused too."""
    problems = []
    for q in dash.queries(dash.load()):
        if q.panel_id in OPERATOR_PANELS:
            continue
        for job, namespace in (
            (WORKER_JOB, LOCAL_NAMESPACE),
            (SERVER_JOB, LOCAL_NAMESPACE),
            (HETERO_JOB, LOCAL_NAMESPACE),
            (HETERO_SERVER_JOB, LOCAL_NAMESPACE),
            ("first", tier.operator_namespace),
            ("second", tier.operator_namespace),
        ):
            operator_job = job in ("first", "second")
            if (q.panel_id in PARTITION_PANELS) != operator_job:
                continue
            expr = dash.substitute(q.expr, namespace=namespace, job=job)
            has = bool(_values(prom, expr, tier))
            if (q.panel_id, q.ref) in MAY_BE_EMPTY:
                continue
            if q.panel_id in SERVER_CLIENT_ONLY:
                want = job in (SERVER_JOB, HETERO_SERVER_JOB)
            elif q.panel_id in HETERO_ONLY:
                want = job in (HETERO_JOB, HETERO_SERVER_JOB)
            elif (q.panel_id, q.ref) in TYPED_SAMPLERS:
                want = job == HETERO_SERVER_JOB
            elif (q.panel_id, q.ref) in TYPED_TRAINERS:
                want = job == HETERO_JOB
            elif q.panel_id in LINK_ONLY:
                want = False  # the tier's jobs classify nodes
            elif q.panel_id == 15 and q.ref == "A":
                want = job == SERVER_JOB  # the samplers' cache (typed ones count per type)
            elif q.panel_id == 15 and q.ref == "B":
                want = job == WORKER_JOB  # the trainers' cache
            elif q.panel_id == 15 and q.ref == "C":
                want = job == SERVER_JOB  # the samplers' GPU tier (a budget below the table)
            elif q.panel_id == 15 and q.ref == "D":
                want = job == WORKER_JOB  # the trainers' GPU tier
            elif q.panel_id == 16 and q.ref == "A":
                want = job in (SERVER_JOB, HETERO_SERVER_JOB)  # bytes the samplers sent
            else:
                want = True
            if has != want:
                problems.append(f"{q.name} for {job}: {'data' if has else 'empty'}")
    assert not problems, "\n".join(problems)


def test_variables_list_the_jobs(prom: Prometheus, tier: TierRun) -> None:
    queries = dash.variable_queries(dash.load())
    selector, label = dash.label_values_query(queries["namespace"])
    assert LOCAL_NAMESPACE in prom.label_values(label, selector, tier.start, tier.end)
    selector, label = dash.label_values_query(
        dash.substitute(queries["job"], namespace=LOCAL_NAMESPACE)
    )
    assert {WORKER_JOB, SERVER_JOB, HETERO_JOB, HETERO_SERVER_JOB} <= prom.label_values(
        label, selector, tier.start, tier.end
    )


def test_no_false_zeros(prom: Prometheus, tier: TierRun) -> None:
    def series(expr: str) -> list[dict[str, Any]]:
        return prom.query_range(expr, tier.start, tier.end)

    # No process exports the series of a role it does not play.
    assert not series('{__name__=~"distgnn_partition_.*", role!=""}')
    assert not series('{__name__=~"distgnn_sampler_.*", role="trainer"}')
    assert not series('{__name__=~"distgnn_trainer_.*", role="sampler"}')
    # Loss and accuracy appear with their first value, never as an unmeasured 0.
    assert not series("distgnn_trainer_loss == 0")
    assert not series("distgnn_trainer_accuracy == 0")
    assert not series("distgnn_trainer_full_neighbourhood_accuracy == 0")
    assert not series("distgnn_sampler_cache_hit_ratio == 0 and distgnn_sampler_cache_hit_ratio")
    # The test accuracy is set by the final evaluation, just before the trainer exits: a
    # scrape may miss it, but it never exists from the trainer's start.
    for job in (WORKER_JOB, SERVER_JOB, HETERO_JOB, HETERO_SERVER_JOB):
        for rank in ("0", "1"):
            sel = f'job="{job}", rank="{rank}"'
            seeds = series(f"distgnn_trainer_seeds_total{{{sel}}}")
            assert seeds, f"{job} rank {rank}: no seeds series"
            first_seed = float(seeds[0]["values"][0][0])
            for metric, split in (
                ("distgnn_trainer_accuracy", "val"),
                ("distgnn_trainer_accuracy", "test"),
                ("distgnn_trainer_full_neighbourhood_accuracy", "test"),
            ):
                acc = series(f'{metric}{{{sel}, split="{split}"}}')
                if (metric, split) == ("distgnn_trainer_accuracy", "val"):
                    assert acc, f"{job} rank {rank}: no validation accuracy"
                if acc:
                    first = float(acc[0]["values"][0][0])
                    # At its first sample an epoch had ended, so it did not exist from the
                    # trainer's start. (A short job can end its first epoch before the first
                    # scrape: then the seeds series appears in the same sample, and its time
                    # says nothing about when the figure appeared.)
                    epoch = series(f"distgnn_trainer_epoch{{{sel}}}")
                    assert epoch, f"{job} rank {rank}: no epoch series"
                    epoch_at = {float(t): float(v) for t, v in epoch[0]["values"]}
                    assert first >= first_seed, f"{job} rank {rank}: {metric} before seeds"
                    assert epoch_at.get(first, 0.0) >= 1, (
                        f"{job} rank {rank}: {metric} {split} appeared at the trainer's start"
                    )
    # The server-client and heterogeneous trainers never look up a feature cache: no 0/0
    # series of theirs. Only the heterogeneous job has embedding series, one per
    # featureless node type.
    for job in (SERVER_JOB, HETERO_JOB, HETERO_SERVER_JOB):
        assert not series(f'distgnn_trainer_feature_cache_lookups_total{{job="{job}"}}')
    assert not series(f'distgnn_sampler_cache_hit_ratio{{job="{HETERO_SERVER_JOB}"}}')
    # The typed samplers hold a share of the featured rows (cacheRatio 0.1): each fetched
    # some from the other, and its hit ratio per node type is a real fraction.
    ratio = "distgnn_sampler_typed_feature_cache_hit_ratio"
    typed = series(f'{ratio}{{job="{HETERO_SERVER_JOB}"}}')
    assert {(s["metric"]["rank"], s["metric"]["node_type"]) for s in typed} == {
        ("0", "paper"),
        ("1", "paper"),
    }, typed
    for s in typed:
        last = float(s["values"][-1][1])
        assert 0 < last < 1, s
    assert not series(f'{ratio}{{job!="{HETERO_SERVER_JOB}"}}')
    hetero = f"{HETERO_JOB}|{HETERO_SERVER_JOB}"
    assert not series(f'distgnn_trainer_embedding_rows_total{{job!~"{hetero}"}}')
    for job in (HETERO_JOB, HETERO_SERVER_JOB):
        types = {
            s["metric"]["node_type"]
            for s in series(f'distgnn_trainer_embedding_rows_total{{job="{job}"}}')
        }
        assert types == {"author", "field_of_study", "institution"}, (job, types)


def test_local_runs_listen_on_loopback(tier: TierRun) -> None:
    assert tier.scrapes.bind_addresses == {"127.0.0.1"}


def test_every_endpoint_passes_promtool(tier: TierRun) -> None:
    expositions = tier.scrapes.expositions
    roles = {name.split("/")[1].rsplit("-", 1)[0] for name in expositions}
    want = {f"{WORKER_JOB}-trainer", f"{SERVER_JOB}-sampler", f"{HETERO_JOB}-trainer"}
    want |= {f"{HETERO_SERVER_JOB}-sampler", f"{HETERO_SERVER_JOB}-trainer"}
    assert want | {f"{RELEASE}-distgnn"} <= roles, roles
    failures = []
    for name, text in sorted(expositions.items()):
        result = promtool("check", "metrics", input=text)
        if result.returncode != 0:
            failures.append(f"{name}: {result.stdout}{result.stderr}")
    assert not failures, "\n".join(failures)


def test_alert_rules_evaluate(prom: Prometheus, tier: TierRun) -> None:
    groups = prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == {
        "DistGNNJobStuckInPhase",
        "DistGNNThroughputCollapsed",
        "DistGNNGangRestarts",
        "DistGNNTrainerWaitingOnData",
        "DistGNNOperatorDown",
    }
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad


def _series_of(prom: Prometheus, selector: str, tier: TierRun) -> dict[str, Any]:
    """The first series matching: its labels and its raw samples over the tier."""
    found = prom.query_range(selector, tier.start, tier.end)
    assert found, f"no series {selector}"
    series = found[0]
    return {
        "labels": series["metric"],
        "values": [[float(t), float(v)] for t, v in series["values"]],
    }


def _per_second(samples: list[list[float]]) -> float:
    (t0, v0), (t1, v1) = samples[0], samples[-1]
    return (v1 - v0) / (t1 - t0)


def test_real_series_for_the_alert_fixtures(prom: Prometheus, tier: TierRun) -> None:
    """The label sets and rates the alert-rule tests replay (tests/prometheus/fixtures/);
    DISTGNN_RECORD_ALERT_SERIES=<file> writes them there."""
    seeds = _series_of(prom, f'distgnn_trainer_seeds_total{{job="{WORKER_JOB}", rank="0"}}', tier)
    wait = _series_of(
        prom, f'distgnn_trainer_data_wait_seconds_sum{{job="{SERVER_JOB}", rank="0"}}', tier
    )
    step = _series_of(
        prom, f'distgnn_trainer_step_seconds_sum{{job="{SERVER_JOB}", rank="0"}}', tier
    )
    restarts = _series_of(prom, 'distgnn_operator_job_restarts{job="first"}', tier)
    phase = _series_of(prom, 'distgnn_operator_job_phase_start_time_seconds{job="second"}', tier)
    up = _series_of(prom, f'up{{job="{RELEASE}-distgnn-metrics"}}', tier)
    real = {
        "seeds": {"labels": seeds["labels"], "per_second": _per_second(seeds["values"])},
        "data_wait": {"labels": wait["labels"], "per_second": _per_second(wait["values"])},
        "step": {"labels": step["labels"], "per_second": _per_second(step["values"])},
        "restarts": {"labels": restarts["labels"], "value": restarts["values"][-1][1]},
        "phase_start": {"labels": phase["labels"]},
        "operator_up": {"labels": up["labels"], "value": max(v for _, v in up["values"])},
    }
    assert real["seeds"]["per_second"] > 0
    assert 0 < real["step"]["per_second"] <= 1.5  # a rank's step time per second of wall time
    assert real["operator_up"]["value"] == 1
    target = os.environ.get("DISTGNN_RECORD_ALERT_SERIES")
    if target:
        Path(target).write_text(json.dumps(real, indent=2, sort_keys=True) + "\n")
