"""End to end on CPU with gloo: samplers and trainers as local processes on loopback.

Each test partitions a small synthetic community graph, starts the real entry points with
the contract's environment, through the launch plan of ``distgnn run``
(``tests/e2e/workload_launcher.py``), scrapes every process's
metrics port while it runs, and checks the job's result.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec, Progress, parse_spec
from distgnn_workload.data.synthetic import generate
from tests.e2e.workload_launcher import LocalWorkload
from tests.support.scrape import get_body

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TRAINER_SERIES = (
    "distgnn_trainer_seeds_total",
    "distgnn_trainer_sampled_edges_total",
    "distgnn_trainer_step_seconds_count",
    "distgnn_trainer_data_wait_seconds_count",
    "distgnn_trainer_epoch",
    "distgnn_trainer_loss",
    "distgnn_trainer_accuracy",
)
SCRAPE_EVERY_S = 0.2
"""How often a running job's processes are scraped. Each scrape is a request that a thread of
the process answers, under the GIL of its training loop. A worker-mode trainer of these small
jobs trains for one or two seconds: at 0.5 s a loaded machine let one finish unseen (its
seeds counter read 0 at every scrape), so 0.2 s, half the cost of a 0.1 s poll. An exit ends
the wait at once."""
SAMPLER_SERIES = (
    "distgnn_sampler_requests_total",
    "distgnn_sampler_request_seconds_count",
    "distgnn_sampler_bytes_sent_total",
    "distgnn_sampler_cache_hit_ratio",
)


def job_spec(**overrides: Any) -> DistGNNJobSpec:
    doc: dict[str, Any] = {
        "dataset": {
            "synthetic": {
                "numNodes": 4000,
                "numEdges": 40000,
                "numFeatures": 16,
                "numClasses": 4,
                # an easy graph (the defaults are products-hard): these jobs check the
                # plumbing, and a few epochs must reach the accuracy they assert
                "homophily": 0.8,
                "featureNoise": 1.0,
                "trainFraction": 0.3,
                "valFraction": 0.1,
            }
        },
        "samplers": {"replicas": 2, "cacheRatio": 0.2, "concurrency": 2, "workers": 1},
        "trainers": {"replicas": 2, "gpusPerPod": 0, "prefetch": 2},
        "model": {"hiddenChannels": 32, "numLayers": 2, "fanout": [10, 5], "dropout": 0.2},
        "training": {"epochs": 4, "batchSize": 128, "learningRate": 0.01},
    }
    for path, value in overrides.items():
        node = doc
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return parse_spec(doc)


def start_job(root: Path, spec: DistGNNJobSpec) -> LocalWorkload:
    job = LocalWorkload(root, spec)
    assert spec.dataset.synthetic is not None
    job.write_partitions(generate(spec.dataset.synthetic))
    job.start_all()
    return job


def scrape(port: int, path: str = "/metrics") -> str | None:
    """The body at ``path``, or None when the process is not (or no longer) serving."""
    return get_body(f"http://127.0.0.1:{port}{path}")


def sample_values(text: str) -> dict[str, float]:
    """Prometheus samples by name (labels dropped, the largest value kept)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        value = float(line.rsplit(" ", 1)[1])
        out[name] = max(out.get(name, value), value)
    return out


def watch(
    job: LocalWorkload, timeout_s: float
) -> tuple[dict[tuple[c.Role, int], dict[str, float]], list[Progress]]:
    """Scrape every process until all have exited; the largest value seen per series."""
    seen: dict[tuple[c.Role, int], dict[str, float]] = {key: {} for key in job.procs}
    progress: list[Progress] = []
    deadline = time.monotonic() + timeout_s
    while job.running() and time.monotonic() < deadline:
        for key in job.procs:
            if job.poll(*key) is not None:
                continue
            text = scrape(job.metrics_ports[key])
            if text is not None:
                for name, value in sample_values(text).items():
                    seen[key][name] = max(seen[key].get(name, value), value)
        body = scrape(job.metrics_ports[(c.Role.trainer, 0)], c.PROGRESS_PATH)
        if body:
            progress.append(Progress.model_validate_json(body))
        job.wait_for_an_exit(SCRAPE_EVERY_S)
    return seen, progress


def finish(
    job: LocalWorkload, timeout_s: float = 240
) -> tuple[dict[tuple[c.Role, int], dict[str, float]], list[Progress]]:
    try:
        seen, progress = watch(job, timeout_s)
        codes = job.wait_all(10)
    finally:
        job.stop_all()
    assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n{job.logs()}"
    return seen, progress


def result_of(job: LocalWorkload) -> c.Result:
    path = job.run_dir / c.RESULT_FILE
    assert path.exists(), job.logs()
    return c.Result.model_validate_json(path.read_text())


def progress_events(job: LocalWorkload) -> list[c.ProgressEvent]:
    lines = job.stdout_of(c.Role.trainer, 0).splitlines()
    return [e for e in map(c.parse_progress_line, lines) if e is not None]


def trainer_series(seen: dict[tuple[c.Role, int], dict[str, float]], rank: int) -> dict[str, float]:
    """Trainer ``rank``'s series: every one of :data:`TRAINER_SERIES`, with seeds trained."""
    series = seen[(c.Role.trainer, rank)]
    missing = [n for n in TRAINER_SERIES if n not in series]
    assert not missing, f"trainer {rank} never served {missing}"
    assert series["distgnn_trainer_seeds_total"] > 0
    return series


def test_server_client_trains_to_accuracy_and_serves_metrics(tmp_path: Path) -> None:
    spec = job_spec()
    job = start_job(tmp_path, spec)
    seen, progress = finish(job)

    result = result_of(job)
    assert result.job_uid == job.uid
    assert result.epochs == 4
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85, job.logs()
    assert result.seeds_per_second > 0

    for rank in range(2):
        trainer_series(seen, rank)
        series = seen[(c.Role.sampler, rank)]
        missing = [n for n in SAMPLER_SERIES if n not in series]
        assert not missing, f"sampler {rank} never served {missing}"
        assert series["distgnn_sampler_requests_total"] > 0
    assert progress, "trainer 0 never answered /progress"
    assert max(p.epoch for p in progress) >= 1
    assert {p.epochs for p in progress} == {4}

    events = progress_events(job)
    epochs_seen = {int(e.metrics["epoch"]) for e in events if e.stage == c.STAGE_EPOCH}
    assert epochs_seen == {1, 2, 3, 4}
    assert any(e.stage == c.STAGE_EVAL and "test_accuracy" in e.metrics for e in events)
    stats = json.loads((job.run_dir / "training_stats.json").read_text())
    assert [e["epoch"] for e in stats["epochs"]] == [1, 2, 3, 4]

    # The completion rule: restarted pods find result.json and exit 0 at once.
    job.procs.clear()
    job.start(c.Role.trainer, 1)
    job.start(c.Role.sampler, 0)
    codes = job.wait_all(60)
    assert set(codes.values()) == {0}, job.logs()
    assert "training is complete" in job.stdout_of(c.Role.trainer, 1)


def test_worker_mode_samples_hop_by_hop_and_fetches_remote_features(tmp_path: Path) -> None:
    spec = job_spec(
        **{
            "samplers.replicas": 0,
            "samplers.replicateTopology": "never",
            "samplers.cacheRatio": 0.3,
            "partition.algorithm": "random",
            "training.epochs": 3,
        }
    )
    job = start_job(tmp_path, spec)
    seen, _ = finish(job)

    result = result_of(job)
    assert result.epochs == 3
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85, job.logs()
    for rank in range(2):
        series = seen[(c.Role.trainer, rank)]
        assert series.get("distgnn_trainer_seeds_total", 0) > 0
        assert "distgnn_trainer_feature_cache_lookups_total" in series
    log = job.stdout_of(c.Role.trainer, 0)
    assert "sampling hop by hop" in log
    assert "feature cache:" in log
    assert "remote feature rows: over the feature exchange" in log


def test_fixed_shape_steps_train_two_ranks_with_one_flat_all_reduce(tmp_path: Path) -> None:
    """The steps a GPU replays from a CUDA graph, run eagerly on CPU: padded batches, the
    parameters broadcast from rank 0, the gradients all-reduced as one flat buffer (gloo);
    remote rows of the partial cache over the trainers' feature exchange, not RPC."""
    spec = job_spec(
        **{
            "samplers.replicas": 0,
            "samplers.cacheRatio": 0.3,
            "partition.algorithm": "random",
            "training.epochs": 3,
        }
    )
    job = LocalWorkload(tmp_path, spec, contract={"extra": {"DISTGNN_CUDA_GRAPH": "static"}})
    assert spec.dataset.synthetic is not None
    job.write_partitions(generate(spec.dataset.synthetic))
    job.start_all()
    finish(job)
    result = result_of(job)
    assert result.epochs == 3
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85, job.logs()
    for rank in range(2):
        log = job.stdout_of(c.Role.trainer, rank)
        assert "training steps on fixed shapes (eager)" in log, log
        assert "remote feature rows: over the feature exchange" in log, log
        assert "shared slots of trainer" not in log, log
        assert "DistributedDataParallel" not in log


@pytest.mark.parametrize("procs", [1, 2], ids=["1-per-pod", "2-per-pod"])
def test_partitioned_features_train_exactly_as_replicated_ones(tmp_path: Path, procs: int) -> None:
    """Worker mode, 2 trainer pods of ``procs`` processes each, the topology replicated: with
    a partial cache (rows over the feature exchange, each process asking the process of its
    own local rank in the owning pod; evaluation every epoch) the job trains the very same
    model as with every row local: same batches, same rows, so the same losses and
    accuracies, bit for bit.

    With one process per pod, a third run has the partial cache and a ``featureMemory``
    below each holder's table (on CPU an explicit budget splits it into two host tiers the
    same way): it trains the very same model too."""
    figures = {}
    runs: list[tuple[float, int | None]] = [(0.3, None), (1.0, None)]
    if procs == 1:
        runs.append((0.3, 40_000))  # 40 kB: 625 of each holder's 2,600 rows of 64 bytes
    for ratio, budget in runs:
        spec = job_spec(
            **{
                "samplers.replicas": 0,
                "samplers.cacheRatio": ratio,
                "samplers.replicateTopology": "always",
                "partition.algorithm": "random",
                "training.epochs": 2,
                "training.evalEvery": 1,
                **({"samplers.featureMemory": budget} if budget else {}),
            }
        )
        root = tmp_path / f"cache-{ratio:g}-budget-{budget}"
        job = LocalWorkload(root, spec, contract={"procs_per_pod": procs})
        assert spec.dataset.synthetic is not None
        job.write_partitions(generate(spec.dataset.synthetic))
        job.start_all()
        finish(job)
        result = result_of(job)
        stats = json.loads((job.run_dir / "training_stats.json").read_text())
        log = job.stdout_of(c.Role.trainer, 0)
        moved = [e["feature_bytes"] for e in stats["epochs"]]
        if ratio < 1:
            assert "remote feature rows: over the feature exchange" in log, log
            assert all(b > 0 for b in moved), moved
        else:
            assert "remote feature rows: none (all cached)" in log, log
            assert moved == [0] * len(moved)
        if budget:
            assert "feature table: 625 of 2600 rows (24%) on the GPU" in log, log
            assert "of gathered rows from its GPU tier" in log, log
        figures[(ratio, budget)] = (
            [(e["loss"], e["val_accuracy"]) for e in stats["epochs"]],
            result.test_accuracy,
        )
    assert figures[(0.3, None)] == figures[(1.0, None)]
    if procs == 1:
        assert figures[(0.3, 40_000)][0] == figures[(0.3, None)][0]
        assert figures[(0.3, 40_000)][1] == figures[(0.3, None)][1]
    test_accuracy = figures[(1.0, None)][1]
    assert test_accuracy is not None
    assert test_accuracy >= 0.85


def test_a_pod_with_two_training_processes_serves_both_on_one_port(tmp_path: Path) -> None:
    spec = job_spec(**{"trainers.replicas": 1})
    job = LocalWorkload(tmp_path, spec, contract={"procs_per_pod": 2})
    assert spec.dataset.synthetic is not None
    job.write_partitions(generate(spec.dataset.synthetic))
    job.start_all()
    port = job.metrics_ports[(c.Role.trainer, 0)]
    ranks_seen: set[str] = set()
    progress: list[Progress] = []
    deadline = time.monotonic() + 240
    while job.poll(c.Role.trainer, 0) is None and time.monotonic() < deadline:
        text = scrape(port) or ""
        for line in text.splitlines():
            if line.startswith("distgnn_trainer_seeds_total{") and float(line.split()[-1]) > 0:
                ranks_seen.add(line.split('rank="')[1].split('"')[0])
        body = scrape(port, c.PROGRESS_PATH)
        if body:
            progress.append(Progress.model_validate_json(body))
        job.wait_for_an_exit(SCRAPE_EVERY_S)
    finish(job)
    assert ranks_seen == {"0", "1"}
    assert progress
    assert {p.epochs for p in progress} == {4}
    result = result_of(job)
    assert result.epochs == 4
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85
    stats = json.loads((job.run_dir / "training_stats.json").read_text())
    assert stats["world_size"] == 2


def test_a_feature_budget_below_the_table_trains_to_accuracy_in_server_client_mode(
    tmp_path: Path,
) -> None:
    """``samplers.featureMemory`` below each holder's table: server-client mode trains to
    accuracy with its samplers' tables split and serving each other from both tiers. (That
    worker mode trains the very same model with a budget as without: see
    test_partitioned_features_train_exactly_as_replicated_ones[1-per-pod].)"""
    spec = job_spec(**{"samplers.featureMemory": 40_000, "training.epochs": 2})
    job = start_job(tmp_path, spec)
    finish(job)
    result = result_of(job)
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85, job.logs()
    for rank in range(2):
        log = job.log_path(c.Role.sampler, rank).read_text()
        assert "feature table: 625 of" in log, log  # of its owned and cached rows
        assert "read from pinned host memory" in log, log
