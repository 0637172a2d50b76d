"""One training process, wired: holder or sampler clients, the loop, the result, the exit.

Global rank = trainer pod rank x processes per pod + local rank. Start-up and shutdown are
the role bootstrap's (:class:`~distgnn_workload.runtime.bootstrap.RoleProcess`); this module
only decides what a trainer builds between them.
"""

from __future__ import annotations

import gc
import logging
import time
from pathlib import Path
from typing import Any

from distgnn_api.contract import EXIT_OK, dump_json
from distgnn_workload.runtime import cuda_memory, link_batches
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features import HolderLayout, split_ids
from distgnn_workload.runtime.lifecycle import write_result
from distgnn_workload.runtime.seeds import holder_ranks
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.trainer.link_loop import LinkTrainer, read_eval_splits
from distgnn_workload.trainer.loop import Trainer
from distgnn_workload.trainer.pipelines import (
    TrainerPipeline,
    place,
    server_pipeline,
    worker_pipeline,
)
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)

JOB_CONFIG_COPY = "job.json"
STATS_FILE = "training_stats.json"
"""Per-epoch figures summed over ranks (seeds, edges, seconds, data wait), written at the end;
on CUDA also each trainer's GPU memory by phase (:data:`cuda_memory.STATS_KEY`)."""


def run(proc: RoleProcess, *, progress_file: Path | None = None, serve_status: bool = True) -> int:
    """Run one training process to completion; returns the exit code."""
    started_at = time.time()
    env, spec = proc.env, proc.spec
    if proc.finished():
        log.info("the job's result exists: training is complete")
        return EXIT_OK
    if spec.dataset.hetero_section is not None:
        from distgnn_workload.trainer import hetero_process

        return hetero_process.run(
            proc, progress_file=progress_file, serve_status=serve_status, started_at=started_at
        )
    device = proc.pick_device()
    rank, ppp = proc.rank, env.procs_per_pod
    world = env.num_trainers * ppp
    tracker = ProgressTracker(spec.training.epochs, mirror=progress_file)
    if serve_status:
        proc.serve_status(progress=tracker)
    store = proc.open_store()
    num_holders = env.num_trainers if env.worker_mode else env.num_samplers
    holders.check_store(store, spec, num_holders)
    if rank == 0:
        keep_job_config(proc)
    # a holder loads before the rendezvous, so that a peer's first request finds its data
    state = (
        holders.load(store, spec, env.rank, env.num_trainers, device) if env.worker_mode else None
    )
    group = proc.join(rpc_threads=16)
    assert proc.rpc is not None
    ranks_of = holder_ranks(
        num_holders,
        world,
        worker_mode=env.worker_mode,
        procs_per_pod=ppp,
        sampler_places=[place(group, m.name) for m in group.samplers],
        trainer_places=[place(group, m.name) for m in group.trainers],
    )
    metrics = TrainerMetrics(rank)
    source: TrainerPipeline
    if state is not None:
        source = worker_pipeline(
            state,
            store,
            spec,
            proc.rpc,
            rank=rank,
            procs_per_pod=ppp,
            local_rank=proc.local_rank,
            metrics=metrics,
        )
    else:
        source = server_pipeline(
            spec,
            group,
            samplers=[h for h, ranks in enumerate(ranks_of) if rank in ranks],
            num_features=store.meta.num_features,
            device=device,
            metrics=metrics,
        )
    proc.serving()
    layout = HolderLayout.from_store(store, num_holders)
    common: dict[str, Any] = {
        "rank": rank,
        "world_size": world,
        "device": device,
        "pipeline": source.pipeline,
        "ranks_of_holder": ranks_of,
        "collectives": proc.collectives,
        "num_features": store.meta.num_features,
        "run_dir": env.run_dir,
        "job_uid": env.job_uid,
        "tracker": tracker,
        "on_epoch": source.after_epoch,
        "started_at": started_at,
    }
    trainer: Trainer
    if spec.is_link_prediction:
        trainer = LinkTrainer(
            spec,
            splits=read_eval_splits(store.path),
            partition_dir=store.path,
            train_ids=link_batches.train_pairs(store, layout),
            **common,
        )
    else:
        trainer = Trainer(
            spec,
            train_ids=split_ids(store, layout, "train"),
            val_ids=split_ids(store, layout, "val"),
            test_ids=split_ids(store, layout, "test"),
            num_classes=store.meta.num_classes,
            **common,
        )
    trainer.resume()
    source.prepare(spec.training.batch_size)
    trainer.cuda_memory.mark("setup")
    # what exists now lives to the end: keep it out of the collector's full passes
    gc.collect()
    gc.freeze()
    proc.collectives.barrier(env.rendezvous_timeout_s, "start of training")
    finish(proc, trainer)
    return EXIT_OK


def keep_job_config(proc: RoleProcess) -> None:
    """Rank 0 keeps the job config in the run directory, once."""
    proc.env.run_dir.mkdir(parents=True, exist_ok=True)
    copy = proc.env.run_dir / JOB_CONFIG_COPY
    if not copy.exists():
        dump_json(copy, proc.config)


def finish(proc: RoleProcess, trainer: Trainer) -> None:
    """Train to the end; rank 0 writes the per-epoch figures and the result; leave the job."""
    result = trainer.fit()
    trainer.cuda_memory.mark("evaluation")
    memory = cuda_memory.gather(trainer.cuda_memory, trainer.collectives)
    if trainer.rank == 0:
        run_dir = proc.env.run_dir
        stats: dict[str, Any] = {"world_size": trainer.world_size, "epochs": trainer.state.history}
        if memory is not None:
            stats[cuda_memory.STATS_KEY] = memory
        dump_json(run_dir / STATS_FILE, stats)
        path = write_result(run_dir, result)
        figures = (
            result.test_link.summary()
            if result.test_link is not None
            else f"test accuracy {result.test_accuracy or 0.0:.4f}"
        )
        log.info("done: %s, %.0f seeds/s; wrote %s", figures, result.seeds_per_second, path)
    proc.leave()
