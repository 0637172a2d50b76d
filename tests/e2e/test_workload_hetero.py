"""End to end on CPU with gloo: a heterogeneous job's processes as local processes, in worker
mode (two trainers) and in server-client mode (two typed sampler servers, two trainers).

The test writes the typed partition store of a small MAG-shaped graph, starts the real
trainer entry points through the launch plan of ``distgnn run``
(``tests/e2e/workload_launcher.py``), scrapes their metrics and ``/progress`` while they run,
and checks ``result.json``; then it resumes a run from its checkpoints (model and embedding
shards) and checks that the resumed run ends where the uninterrupted one did, in both modes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec, EvaluationKind, Progress, parse_spec
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.partition.writer import write_partitions
from tests.e2e.test_workload_training import (
    finish,
    progress_events,
    result_of,
    trainer_series,
)
from tests.e2e.workload_launcher import LocalWorkload

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

SCALE, CLASSES = 0.005, 8
Seen = dict[tuple[c.Role, int], dict[str, float]]
"""The largest value of each series each process served (``finish``)."""


def hetero_spec(
    samplers: int = 0,
    cache_ratio: float | None = None,
    embedding_memory: int | None = None,
    **training: Any,
) -> DistGNNJobSpec:
    cache = {} if cache_ratio is None else {"cacheRatio": cache_ratio}
    trainers: dict[str, Any] = {"replicas": 2, "gpusPerPod": 0}
    if embedding_memory is not None:
        trainers["embeddingMemory"] = embedding_memory
    return parse_spec(
        {
            "dataset": {
                "syntheticMag": {"scale": SCALE, "numClasses": CLASSES, "seed": 3},
                "hetero": {"targetNodeType": "paper"},
            },
            "partition": {"algorithm": "metis", "numPartitions": 2},
            "samplers": {"replicas": samplers, "gpusPerPod": 0, "concurrency": 2, **cache},
            "trainers": trainers,
            "model": {
                "arch": "rsage",
                "hiddenChannels": 32,
                "numLayers": 2,
                "fanout": [8, 4],
                "edgeFanouts": {"field_of_study__rev_has_topic__paper": [4, 2]},
                "embeddingDim": 16,
                "dropout": 0.2,
            },
            "training": {"epochs": 4, "batchSize": 128, "learningRate": 0.01, **training},
        }
    )


def start(
    root: Path,
    spec: DistGNNJobSpec,
    uid: str | None = None,
    extra: dict[str, str] | None = None,
) -> LocalWorkload:
    """Partition (once per ``root``) and start ``spec``'s processes; ``extra``: settings
    added to every process's environment."""
    contract: dict[str, Any] = {"extra": extra or {}}
    if uid is None:
        job = LocalWorkload(root, spec, contract=contract)
    else:
        job = LocalWorkload(root, spec, uid=uid, contract=contract)
    if not (job.partition_dir / c.SUCCESS_MARKER).exists():
        graph = generate_mag(SyntheticHeteroConfig(scale=SCALE, num_classes=CLASSES, seed=3))
        write_partitions(job.partition_dir, graph, 2, spec=spec.partition, key=job.key)
    job.start_all()
    return job


def majority_share() -> float:
    g = generate_mag(SyntheticHeteroConfig(scale=SCALE, num_classes=CLASSES, seed=3))
    return float(np.bincount(g.y[g.test_mask]).max() / g.test_mask.sum())


def check_worker_run(job: LocalWorkload, seen: Seen, progress: list[Progress]) -> None:
    """What a worker-mode run must show: two trainers and no sampler, 4 epochs, a full-
    neighbourhood test figure well above the majority class, the trainers' series, /progress,
    every training seed once per epoch, and one embedding shard per rank."""
    assert set(job.specs) == {(c.Role.trainer, 0), (c.Role.trainer, 1)}

    result = result_of(job)
    assert result.job_uid == job.uid
    assert result.epochs == 4
    # the default training.evaluation: a full-neighbourhood test figure, a sampled validation
    assert result.test_accuracy_kind == EvaluationKind.full
    assert result.val_accuracy_kind == EvaluationKind.sampled
    baseline = majority_share()
    assert result.test_accuracy is not None
    assert result.test_accuracy > 2 * baseline, (result.test_accuracy, baseline, job.logs())
    assert result.seeds_per_second > 0

    for rank in range(2):
        trainer_series(seen, rank)
    assert progress, "trainer 0 never answered /progress"
    assert {p.epochs for p in progress} == {4}

    events = progress_events(job)
    assert {int(e.metrics["epoch"]) for e in events if e.stage == c.STAGE_EPOCH} == {1, 2, 3, 4}
    assert any(e.stage == c.STAGE_EVAL and "test_accuracy" in e.metrics for e in events)

    stats = check_seeds_and_shards(job)
    assert [e["epoch"] for e in stats["epochs"]] == [1, 2, 3, 4]


@pytest.mark.timeout(800)
def test_hetero_worker_mode_trains_and_a_partial_cache_fetches_rows_as_with_all_rows(
    tmp_path: Path,
) -> None:
    """The run with a partial cache is also checked as any worker-mode run
    (:func:`check_worker_run`); both runs read one partition. The all-cached run also keeps
    every embedding shard in host memory (``trainers.embeddingMemory: 0``), which changes
    where the rows live, not the run."""

    def spec_of(ratio: float) -> DistGNNJobSpec:
        spec = hetero_spec(cache_ratio=ratio, embedding_memory=0 if ratio == 1 else None)
        assert spec.samplers.cache_ratio == ratio
        return spec

    bytes_logged: list[float] = []

    def check_rank(ratio: float, series: dict[str, float], log: str) -> None:
        if ratio < 1:
            assert series["distgnn_trainer_remote_feature_bytes_total"] > 0
            # the trainers' feature exchange (collectives), not RPC
            assert "remote feature rows of 'paper': over the feature exchange" in log
            if "epoch 1:" in log:  # the rank that logs the epochs: the bytes a step pulled
                assert re.search(r"remote features \d+\.\d\d MB/step", log), log[-2000:]
                bytes_logged.append(ratio)
        else:
            assert "remote feature rows of 'paper': none (all cached)" in log
        tables = [line for line in log.splitlines() if "embedding tables:" in line]
        assert tables, log[-2000:]
        in_host = tables[-1].count("host memory")
        assert in_host == (3 if ratio == 1 else 0), tables  # author, institution, field

    _check_cache_ratio_runs(tmp_path, c.Role.trainer, spec_of, check_worker_run, check_rank)
    assert bytes_logged == [0.2], bytes_logged


@pytest.mark.timeout(600)
def test_hetero_fixed_shape_steps_of_two_ranks_exchange_embedding_blocks(tmp_path: Path) -> None:
    """The steps a GPU replays from a CUDA graph, run eagerly on CPU by two worker-mode
    ranks: caps fitted to each rank's batches and agreed (the largest of each), the
    embedding lookups and row gradients exchanged in fixed blocks inside the step (gloo
    here), fitted to the first batches' nodes per owner and agreed too, the dense gradients
    all-reduced as one flat buffer. The run is checked as any worker-mode run."""
    extra = {c.ENV_CUDA_GRAPH: "static", c.ENV_OVERLAP_ALLREDUCE: "0"}
    job = start(tmp_path, hetero_spec(), extra=extra)
    seen, progress = finish(job, timeout_s=360)
    check_worker_run(job, seen, progress)
    agreed = set()
    for rank in range(2):
        log = job.stdout_of(c.Role.trainer, rank)
        assert "training steps on fixed shapes (eager)" in log, log[-3000:]
        assert "typed sampler fitted to" in log, log[-3000:]
        lines = [line for line in log.splitlines() if "typed step caps agreed over 2 ranks" in line]
        assert lines, log[-3000:]
        agreed.add(lines[-1].split("ranks: ")[1])
        # the lookups' blocks fitted to the nodes per owner, below the buffers
        blocks = [line for line in log.splitlines() if "embedding lookups in blocks of" in line]
        assert blocks, log[-3000:]
        agreed.add(blocks[-1].split("blocks of ")[1])
        series = seen[(c.Role.trainer, rank)]
        assert series["distgnn_trainer_embedding_remote_rows_total"] > 0, series
    assert len(agreed) == 2, agreed  # the caps' line and the blocks' line, each the same
    # the steps that went eager (over the caps or a block), as the ranks logged them, are
    # in the training stats (summed over the ranks: both step eagerly together)
    logged = [
        int(line.split("), ")[1].split(" steps ran eagerly")[0])
        for line in job.stdout_of(c.Role.trainer, 0).splitlines()
        if "steps ran eagerly over the step's" in line
    ]
    stats = json.loads((job.run_dir / "training_stats.json").read_text())
    counted = [e["eager_steps"] for e in stats["epochs"]]
    assert sum(counted) == 2 * (logged[-1] if logged else 0), (counted, logged)


@pytest.mark.timeout(800)
def test_hetero_server_client_mode_trains_and_a_partial_cache_fetches_rows_between_samplers(
    tmp_path: Path,
) -> None:
    """The run with a partial cache is also checked as any server-client run
    (:func:`check_server_client_run`); both runs read one partition."""

    def check_rank(ratio: float, series: dict[str, float], log: str) -> None:
        if ratio < 1:
            assert 0 < series["distgnn_sampler_typed_feature_cache_hit_ratio"] < 1

    _check_cache_ratio_runs(
        tmp_path,
        c.Role.sampler,
        lambda ratio: hetero_spec(samplers=2, cache_ratio=ratio),
        check_server_client_run,
        check_rank,
    )


def _check_cache_ratio_runs(
    tmp_path: Path,
    role: c.Role,
    spec_of: Callable[[float], DistGNNJobSpec],
    check_run: Callable[[LocalWorkload, Seen, list[Progress]], None],
    check_rank: Callable[[float, dict[str, float], str], None],
) -> None:
    """A run with a partial cache (checked with ``check_run``) and one with every row
    cached: the processes of ``role`` fetch other partitions' rows from their owners only
    in the first (``check_rank`` checks the rest of a rank's series and log), and both
    runs reach the same test figure, well above the majority class."""
    accuracy: dict[float, float] = {}
    for ratio in (0.2, 1.0):
        job = start(tmp_path, spec_of(ratio))
        seen, progress = finish(job, timeout_s=360)
        if ratio < 1:
            check_run(job, seen, progress)
        figure = result_of(job).test_accuracy
        assert figure is not None
        accuracy[ratio] = figure
        for rank in range(2):
            series = seen[(role, rank)]
            lookups = series[f"distgnn_{role}_typed_feature_lookups_total"]
            hits = series[f"distgnn_{role}_typed_feature_cache_hits_total"]
            log = job.stdout_of(role, rank)
            if ratio < 1:
                # other partitions' rows were fetched from their owners, not all cached
                assert 0 < hits < lookups, (ratio, rank, series)
                assert "fetched featured rows from their owners: {'paper': 0}" not in log
            else:
                assert hits == lookups > 0, (ratio, rank, series)
                assert "fetched featured rows from their owners: {'paper': 0}" in log
            check_rank(ratio, series, log)
    baseline = majority_share()
    assert accuracy[0.2] > 2 * baseline, (accuracy, baseline)
    # the same rows, the same samples: the cache changes where rows come from, not the run
    assert abs(accuracy[0.2] - accuracy[1.0]) <= 0.02, accuracy


def check_seeds_and_shards(job: LocalWorkload) -> dict[str, Any]:
    """Every training seed once per epoch (each rank pads its share to the longest one), and
    one embedding shard per trainer rank after the last epoch. Returns the training stats."""
    stats: dict[str, Any] = json.loads((job.run_dir / "training_stats.json").read_text())
    graph = generate_mag(SyntheticHeteroConfig(scale=SCALE, num_classes=CLASSES, seed=3))
    num_train = int(graph.train_mask.sum())
    for epoch in stats["epochs"]:
        assert num_train <= epoch["seeds"] < 1.25 * num_train, epoch
    shards = job.run_dir / "checkpoints" / "embeddings" / "epoch-4"
    assert sorted(p.name for p in shards.iterdir()) == ["rank-0-of-2.pt", "rank-1-of-2.pt"]
    return stats


def check_server_client_run(job: LocalWorkload, seen: Seen, progress: list[Progress]) -> None:
    """What a server-client run must show: two typed samplers and two trainers, 4 epochs, a
    test figure well above the majority class, featured rows and samples from the samplers,
    /progress, every training seed once per epoch, and the embeddings on the trainers."""
    assert set(job.specs) == {
        (c.Role.sampler, 0),
        (c.Role.sampler, 1),
        (c.Role.trainer, 0),
        (c.Role.trainer, 1),
    }

    result = result_of(job)
    assert result.epochs == 4
    assert result.test_accuracy_kind == EvaluationKind.full
    baseline = majority_share()
    assert result.test_accuracy is not None
    assert result.test_accuracy > 2 * baseline, (result.test_accuracy, baseline, job.logs())
    for rank in range(2):
        series = trainer_series(seen, rank)
        # the featured rows came from the samplers
        assert series["distgnn_trainer_remote_feature_bytes_total"] > 0
        series = seen[(c.Role.sampler, rank)]
        for name in ("distgnn_sampler_requests_total", "distgnn_sampler_bytes_sent_total"):
            assert series.get(name, 0) > 0, f"sampler {rank}: {name} {series}"
    assert progress, "trainer 0 never answered /progress"
    assert {p.epochs for p in progress} == {4}
    check_seeds_and_shards(job)  # the embeddings stay with the trainers, none on a sampler
    for rank in range(2):
        assert "typed sampler" in job.stdout_of(c.Role.sampler, rank)
        assert "received" in job.stdout_of(c.Role.trainer, rank)


@pytest.mark.parametrize("samplers", [0, 2], ids=["worker-mode", "server-client"])
def test_hetero_resume_continues_where_the_checkpoint_left_off(
    tmp_path: Path, samplers: int
) -> None:
    # An uninterrupted 2-epoch run, and a 1-epoch run resumed to 2 epochs (its checkpoints:
    # the model, the dense optimizer, the embedding shards and their row-sparse Adam state).
    # In server-client mode every batch is sampled on a stream of its own: the same too.
    # (three runs of one partition, each in its own run directory)
    straight = start(tmp_path, hetero_spec(samplers, epochs=2, evalEvery=0))
    finish(straight, timeout_s=360)
    expected = result_of(straight)

    first = start(tmp_path, hetero_spec(samplers, epochs=1, evalEvery=0))
    finish(first, timeout_s=360)
    (first.run_dir / c.RESULT_FILE).unlink()
    resumed = start(tmp_path, hetero_spec(samplers, epochs=2, evalEvery=0), uid=first.uid)
    finish(resumed, timeout_s=360)
    got = result_of(resumed)
    log = resumed.stdout_of(c.Role.trainer, 0)
    assert "resumed from epoch-1.pt" in log, log[-3000:]
    assert "embedding shards of epoch 1" in log, log[-3000:]

    history_a = json.loads((straight.run_dir / "training_stats.json").read_text())["epochs"]
    history_b = json.loads((resumed.run_dir / "training_stats.json").read_text())["epochs"]
    assert [h["seeds"] for h in history_b] == [h["seeds"] for h in history_a]
    assert [h["loss"] for h in history_b] == pytest.approx([h["loss"] for h in history_a], rel=1e-5)
    assert got.test_accuracy == pytest.approx(expected.test_accuracy, abs=1e-9)
