"""One training process, wired: the start-up every trainer makes, the loop, the result, the
exit.

Global rank = trainer pod rank x processes per pod + local rank. Start-up and shutdown are
the role bootstrap's (:class:`~distgnn_workload.runtime.bootstrap.RoleProcess`); :func:`run`
is the one sequence between them, for every graph kind and mode: the device, the progress
server, the job config's copy, the store (a worker-mode holder loads its rows before the
rendezvous, so that a peer's first request finds them), the rendezvous with
:data:`RPC_THREADS` RPC threads, the rank's bundle
(:class:`~distgnn_workload.trainer.rank.TrainerRank`), its batch and feature sources, the
trainer, the resume, the CUDA memory of the set-up, the barrier and the training. The graph
kind decides only what it loads and builds (:class:`RankStart`), in one place
(:func:`start_of`): :class:`NodeStart` for a homogeneous graph, :class:`TypedStart` for a
typed one.

A typed job's worker-mode trainer pod ``p`` serves partition ``p`` of the typed store (its
seeds, the featured rows and the rows of the learnt embeddings of the nodes it owns). Every
trainer reads the store's whole typed topology, so sampling is local; per featured node
type it holds its partition's rows plus a hot cache of ``samplers.cacheRatio`` of the
others' rows, and fetches the rest of a batch's rows from their owners over RPC (none with
a ratio of 1). In server-client mode sampler ``h`` serves partition ``h``
(:mod:`distgnn_workload.sampler.serving`); a trainer reads only the store's splits,
labels and partition book and draws typed batches from the samplers of its GPU, else of its
node (:class:`~distgnn_workload.runtime.remote_batches.TypedRemotePipeline`). The learnt
embeddings stay with the trainers: the rows of partition ``h`` belong to the trainers that
draw from sampler ``h``.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from distgnn_api.contract import EXIT_OK, dump_json
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.runtime import cuda_memory, link_batches
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features import HolderLayout, split_ids
from distgnn_workload.runtime.features.cache_policy import load_typed_tables
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.features.serving import serve_tables
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.lifecycle import write_result
from distgnn_workload.runtime.remote_batches import TypedRemotePipeline
from distgnn_workload.runtime.rendezvous import Group
from distgnn_workload.runtime.seeds import holder_ranks
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.runtime.training_data import (
    HeteroTrainingData,
    check_store,
    from_store,
    open_typed_store,
)
from distgnn_workload.trainer.link_loop import HeteroLinkTrainer, LinkTrainer, read_eval_splits
from distgnn_workload.trainer.loop import HeteroTrainer, Trainer
from distgnn_workload.trainer.pipelines import (
    TrainerPipeline,
    place,
    server_pipeline,
    typed_server_pipeline,
    typed_worker_features,
    worker_pipeline,
)
from distgnn_workload.trainer.rank import TrainerRank, TypedRank, input_dtype
from distgnn_workload.trainer.rank_loop import Pipeline
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)

JOB_CONFIG_COPY = "job.json"
STATS_FILE = "training_stats.json"
"""Per-epoch figures summed over ranks (seeds, edges, seconds, data wait), written at the end;
on CUDA also each trainer's GPU memory by phase (:data:`cuda_memory.STATS_KEY`)."""

RPC_THREADS = 16
"""RPC threads of every trainer: the peers' feature requests in worker mode, the sampler
servers' replies in server-client mode."""

GIL_SWITCH_S = 0.0002
"""The interpreter's thread switch interval on a GPU (Python's default is 5 ms): the
training loop and the loader's thread both launch GPU work, and a batch's host work on one
must not hold the other's next launch for long. On 2 x H200, worker mode with partitioned
features (cacheRatio 0.2): 181k -> 189k seeds/s per GPU; replicated unchanged
(benchmarks/gpu_distributed/README.md)."""


class RankStart(Protocol):
    """What a graph kind loads and builds in a trainer's start-up (:func:`run`)."""

    def load(self) -> None:
        """Open and check the store; in worker mode, load and serve this pod's rows."""

    def sources(self, group: Group, at: TrainerRank[Any], metrics: TrainerMetrics) -> Any:
        """``at`` with the rank's batch and feature sources and what follows each epoch;
        every RPC target of the process is registered once this returns."""

    def trainer(self, at: Any) -> Trainer:
        """The rank's training loop (node or link task)."""

    def prepare(self, batch_size: int) -> None:
        """Capture a local sampler's CUDA graph now, not on the loader thread mid-epoch."""

    def report(self) -> None:
        """Log what the rank's sources moved, once training is over."""


def start_of(proc: RoleProcess) -> RankStart:
    """What this trainer loads and builds: the one place a trainer looks at the graph kind."""
    if proc.spec.dataset.hetero_section is not None:
        return TypedStart(proc)
    return NodeStart(proc)


def run(proc: RoleProcess, *, progress_file: Path | None = None, serve_status: bool = True) -> int:
    """Run one training process to completion; returns the exit code."""
    started_at = time.time()
    env, spec = proc.env, proc.spec
    if proc.finished():
        log.info("the job's result exists: training is complete")
        return EXIT_OK
    start = start_of(proc)
    device = proc.pick_device()
    rank, ppp = proc.rank, env.procs_per_pod
    world = env.num_trainers * ppp
    tracker = ProgressTracker(spec.training.epochs, mirror=progress_file)
    if serve_status:
        proc.serve_status(progress=tracker)
    if rank == 0:
        keep_job_config(proc)
    start.load()
    group = proc.join(rpc_threads=RPC_THREADS)
    num_holders = env.num_trainers if env.worker_mode else env.num_samplers
    at: TrainerRank[Any] = TrainerRank(
        rank=rank,
        world_size=world,
        device=device,
        ranks_of_holder=holder_ranks(
            num_holders,
            world,
            worker_mode=env.worker_mode,
            procs_per_pod=ppp,
            sampler_places=[place(group, m.name) for m in group.samplers],
            trainer_places=[place(group, m.name) for m in group.trainers],
        ),
        run_dir=env.run_dir,
        job_uid=env.job_uid,
        collectives=proc.collectives,
        tracker=tracker,
        started_at=started_at,
    )
    at = start.sources(group, at, TrainerMetrics(rank))
    proc.serving()
    trainer = start.trainer(at)
    trainer.resume()
    start.prepare(spec.training.batch_size)
    trainer.cuda_memory.mark("setup")
    # what exists now lives to the end: keep it out of the collector's full passes
    gc.collect()
    gc.freeze()
    if device.type == "cuda":
        sys.setswitchinterval(GIL_SWITCH_S)
    proc.collectives.barrier(env.rendezvous_timeout_s, "start of training")
    finish(proc, trainer)
    start.report()
    return EXIT_OK


class NodeStart:
    """What a homogeneous job's trainer loads and builds: the partition store, this pod's
    holder in worker mode, the node or link pipeline and trainer."""

    def __init__(self, proc: RoleProcess) -> None:
        self.proc = proc
        env = proc.env
        self.num_holders = env.num_trainers if env.worker_mode else env.num_samplers
        self.store: PartitionStore | None = None
        self.state: holders.HolderState | None = None
        self.source: TrainerPipeline | None = None

    def load(self) -> None:
        proc, env = self.proc, self.proc.env
        store = proc.open_store()
        check_store(store, proc.spec, self.num_holders)
        self.store = store
        if env.worker_mode:
            # loaded before the rendezvous: a peer's first request finds its data
            self.state = holders.load(store, proc.spec, env.rank, env.num_trainers, proc.device)

    def sources(
        self, group: Group, at: TrainerRank[Any], metrics: TrainerMetrics
    ) -> TrainerRank[Pipeline]:
        proc, spec, store = self.proc, self.proc.spec, self.store
        assert store is not None, "load() first"
        assert proc.rpc is not None, "join() first"
        if self.state is not None:
            source = worker_pipeline(
                self.state,
                store,
                spec,
                proc.rpc,
                rank=at.rank,
                procs_per_pod=proc.env.procs_per_pod,
                local_rank=proc.local_rank,
                metrics=metrics,
            )
        else:
            source = server_pipeline(
                spec,
                group,
                samplers=at.holders(),
                num_features=store.meta.num_features,
                device=at.device,
                metrics=metrics,
            )
        self.source = source
        return replace(at, batches=source.pipeline, on_epoch=source.after_epoch)

    def trainer(self, at: TrainerRank[Pipeline]) -> Trainer:
        spec, store = self.proc.spec, self.store
        assert store is not None, "load() first"
        assert at.batches is not None, "sources() first"
        layout = HolderLayout.from_store(store, self.num_holders)
        common = at.loop_args()
        if spec.is_link_prediction:
            return LinkTrainer(
                spec,
                splits=read_eval_splits(store.path),
                partition_dir=store.path,
                train_ids=link_batches.train_pairs(store, layout),
                pipeline=at.batches,
                num_features=store.meta.num_features,
                **common,
            )
        return Trainer(
            spec,
            pipeline=at.batches,
            train_ids=split_ids(store, layout, "train"),
            val_ids=split_ids(store, layout, "val"),
            test_ids=split_ids(store, layout, "test"),
            num_features=store.meta.num_features,
            num_classes=store.meta.num_classes,
            **common,
        )

    def prepare(self, batch_size: int) -> None:
        if self.source is not None:
            self.source.prepare(batch_size)

    def report(self) -> None:
        """Nothing beyond the metrics: the holder's figures are exported as they happen."""


class TypedStart:
    """What a typed job's trainer loads and builds (see the module docstring)."""

    def __init__(self, proc: RoleProcess) -> None:
        self.proc = proc
        env = proc.env
        self.num_holders = env.num_trainers if env.worker_mode else env.num_samplers
        self.loaded: tuple[HeteroPartitionStore, HeteroTrainingData] | None = None
        self.tables: dict[str, FeatureTable] | None = None
        self.features: TypedFeatureSource | None = None
        self.remote: TypedRemotePipeline | None = None
        self.built: HeteroTrainer | None = None

    def load(self) -> None:
        proc, env, spec = self.proc, self.proc.env, self.proc.spec
        worker = env.worker_mode
        store = open_typed_store(env.partition_dir, self.num_holders, worker_mode=worker)
        t0 = time.perf_counter()
        if worker:
            # loaded and served before the rendezvous: a peer's first request finds them
            self.tables = load_typed_tables(
                store,
                env.rank,
                spec.samplers.cache_ratio,
                proc.device,
                input_dtype(spec, proc.device),
                device_budget=holders.device_feature_budget(spec, proc.device, 0),
            )
            serve_tables(self.tables)
        data = from_store(store, graph=worker, features=False)
        log.info(
            "typed graph: %s nodes, %d edge types, target %s (%d classes); read in %.1f s",
            data.node_counts,
            len(data.edge_types),
            data.target_node_type,
            data.num_classes,
            time.perf_counter() - t0,
        )
        self.loaded = (store, data)

    def sources(self, group: Group, at: TrainerRank[Any], metrics: TrainerMetrics) -> TypedRank:
        proc, spec = self.proc, self.proc.spec
        on_epoch: Callable[[], None] | None = None
        if self.tables is not None:
            # this pod's tables, the rest over the exchange: holder h's process of this
            # local rank answers (h * procs per pod + local rank)
            self.features, on_epoch = typed_worker_features(
                self.tables, metrics, self.num_holders, proc.env.procs_per_pod, proc.local_rank
            )
        else:
            self.remote = typed_server_pipeline(
                spec, samplers=at.holders(), rank=at.rank, device=at.device, metrics=metrics
            )
        return replace(
            at,
            batches=self.remote,
            features=self.features,
            on_epoch=on_epoch,
            partition_dir=proc.env.partition_dir,
        )

    def trainer(self, at: TypedRank) -> HeteroTrainer:
        spec = self.proc.spec
        assert self.loaded is not None, "load() first"
        store, data = self.loaded
        if spec.is_link_prediction:
            edge_type, reverse = link_batches.link_edge_types(store.path)
            self.built = HeteroLinkTrainer(
                spec,
                data,
                at,
                splits=read_eval_splits(store.path),
                edge_type=edge_type,
                reverse=reverse,
                train_ids=link_batches.typed_train_pairs(
                    store.path, store.num_partitions, data.node_counts[edge_type[2]]
                ),
            )
        else:
            self.built = HeteroTrainer(spec, data, at)
        return self.built

    def prepare(self, batch_size: int) -> None:
        if self.built is not None:
            self.built.hetero.prepare(batch_size)

    def report(self) -> None:
        rank = self.proc.rank
        if self.features is not None:
            fetched = dict(self.features.fetched_rows)
            log.info("trainer %d fetched featured rows from their owners: %s", rank, fetched)
        if self.remote is not None:
            log.info(
                "trainer %d received %d typed batches from sampler servers",
                rank,
                self.remote.received,
            )


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
