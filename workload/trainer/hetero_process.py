"""One training process of a heterogeneous job, wired: the typed store, the loop, the result.

Worker mode: trainer pod ``p`` serves partition ``p`` of the typed store (its seeds, the
featured rows and the rows of the learnt embeddings of the nodes it owns). Every trainer
reads the store's whole typed topology, so sampling is local; per featured node type it holds
its partition's rows plus a hot cache of ``samplers.cacheRatio`` of the others' rows, and
fetches the rest of a batch's rows from their owners over RPC (none with a ratio of 1).

Server-client mode: sampler ``h`` serves partition ``h``
(:mod:`distgnn_workload.sampler.hetero_server`); a trainer reads only the store's splits,
labels and partition book, and draws typed batches from the samplers of its GPU, else of its
node (:class:`~distgnn_workload.trainer.hetero_remote.HeteroRemotePipeline`). The learnt
embeddings stay with the trainers: the rows of partition ``h`` belong to the trainers that
draw from sampler ``h``.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch

from distgnn_api.contract import EXIT_OK
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features.typed_source import (
    TypedFeatureSource,
    load_typed_tables,
    rpc_typed_fetch,
)
from distgnn_workload.runtime.features.typed_table import serve_typed_tables
from distgnn_workload.runtime.hetero_batches import feature_bytes
from distgnn_workload.runtime.seeds import holder_ranks
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.trainer.hetero_data import from_store, open_typed_store
from distgnn_workload.trainer.hetero_link_loop import (
    HeteroLinkTrainer,
    link_edge_types,
    typed_train_pairs,
)
from distgnn_workload.trainer.hetero_loop import HeteroTrainer
from distgnn_workload.trainer.hetero_rank import HeteroRank
from distgnn_workload.trainer.hetero_remote import HeteroRemotePipeline, rpc_request
from distgnn_workload.trainer.link_loop import read_eval_splits
from distgnn_workload.trainer.pipelines import place
from distgnn_workload.trainer.process import finish, keep_job_config
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)


def run(
    proc: RoleProcess,
    *,
    progress_file: Path | None = None,
    serve_status: bool = True,
    started_at: float | None = None,
) -> int:
    """Run one training process of a heterogeneous job to completion; the exit code."""
    started_at = started_at or time.time()
    env, spec = proc.env, proc.spec
    device = proc.pick_device()
    rank, ppp = proc.rank, env.procs_per_pod
    world = env.num_trainers * ppp
    worker = env.worker_mode
    tracker = ProgressTracker(spec.training.epochs, mirror=progress_file)
    if serve_status:
        proc.serve_status(progress=tracker)
    num_holders = env.num_trainers if worker else env.num_samplers
    store = open_typed_store(env.partition_dir, num_holders, worker_mode=worker)
    if rank == 0:
        keep_job_config(proc)
    t0 = time.perf_counter()
    features: TypedFeatureSource | None = None
    tables = None
    if worker:
        # loaded and served before the rendezvous: a peer's first request finds them
        bf16 = spec.training.bf16 and device.type == "cuda"
        tables = load_typed_tables(
            store,
            env.rank,
            spec.samplers.cache_ratio,
            device,
            torch.bfloat16 if bf16 else torch.float32,
        )
        serve_typed_tables(tables)
    data = from_store(store, graph=worker, features=False)
    log.info(
        "typed graph: %s nodes, %d edge types, target %s (%d classes); read in %.1f s",
        data.node_counts,
        len(data.edge_types),
        data.target_node_type,
        data.num_classes,
        time.perf_counter() - t0,
    )
    group = proc.join(rpc_threads=4 if worker else 16)
    ranks_of = holder_ranks(
        num_holders,
        world,
        worker_mode=worker,
        procs_per_pod=ppp,
        sampler_places=[place(group, m.name) for m in group.samplers],
        trainer_places=[place(group, m.name) for m in group.trainers],
    )
    remote: HeteroRemotePipeline | None = None
    metrics = TrainerMetrics(rank)
    on_epoch: Callable[[], None] | None = None
    if tables is not None:

        def holder_name(h: int) -> str:
            return f"trainer-{h * ppp + proc.local_rank}"

        source = features = TypedFeatureSource(
            tables, rpc_typed_fetch(holder_name), peer_name=holder_name
        )

        def flush_feature_stats() -> None:
            for t, s in source.take().items():
                metrics.typed_feature_stats(t, s.lookups, s.hits, s.bytes_fetched)

        on_epoch = flush_feature_stats
    if not worker:
        samplers = [h for h, ranks in enumerate(ranks_of) if rank in ranks]
        log.info("drawing typed batches from %s", ", ".join(f"sampler-{h}" for h in samplers))
        remote = HeteroRemotePipeline(
            rpc_request,
            rank=rank,
            seed=spec.training.seed,
            device=device,
            prefetch=spec.trainers.prefetch,
            concurrency=spec.samplers.concurrency,
            on_batch=lambda wire: metrics.remote_bytes.inc(feature_bytes(wire)),
        )
    proc.serving()
    at = HeteroRank(
        rank=rank,
        world_size=world,
        device=device,
        ranks_of_holder=ranks_of,
        collectives=proc.collectives,
        run_dir=env.run_dir,
        job_uid=env.job_uid,
        tracker=tracker,
        started_at=started_at,
        batches=remote,
        features=features,
        on_epoch=on_epoch,
        partition_dir=env.partition_dir,
    )
    trainer: HeteroTrainer
    if spec.is_link_prediction:
        edge_type, reverse = link_edge_types(store.path)
        trainer = HeteroLinkTrainer(
            spec,
            data,
            at,
            splits=read_eval_splits(store.path),
            edge_type=edge_type,
            reverse=reverse,
            train_ids=typed_train_pairs(
                store.path, store.num_partitions, data.node_counts[edge_type[2]]
            ),
        )
    else:
        trainer = HeteroTrainer(spec, data, at)
    trainer.resume()
    trainer.hetero.prepare(spec.training.batch_size)
    gc.collect()
    gc.freeze()
    proc.collectives.barrier(env.rendezvous_timeout_s, "start of training")
    finish(proc, trainer)
    if features is not None:
        fetched = dict(features.fetched_rows)
        log.info("trainer %d fetched featured rows from their owners: %s", rank, fetched)
    if remote is not None:
        log.info("trainer %d received %d typed batches from sampler servers", rank, remote.received)
    return EXIT_OK
