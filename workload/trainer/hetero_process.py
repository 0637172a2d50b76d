"""What a typed job's trainer loads and builds in the trainer's start-up
(:func:`distgnn_workload.trainer.process.run`): the typed store, its rows and the typed
node or link trainer.

Worker mode: trainer pod ``p`` serves partition ``p`` of the typed store (its seeds, the
featured rows and the rows of the learnt embeddings of the nodes it owns). Every trainer
reads the store's whole typed topology, so sampling is local; per featured node type it holds
its partition's rows plus a hot cache of ``samplers.cacheRatio`` of the others' rows, and
fetches the rest of a batch's rows from their owners over RPC (none with a ratio of 1).

Server-client mode: sampler ``h`` serves partition ``h``
(:mod:`distgnn_workload.sampler.hetero_server`); a trainer reads only the store's splits,
labels and partition book, and draws typed batches from the samplers of its GPU, else of its
node (:class:`~distgnn_workload.trainer.pipelines.TypedRemotePipeline`). The learnt
embeddings stay with the trainers: the rows of partition ``h`` belong to the trainers that
draw from sampler ``h``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.runtime.batches import feature_bytes
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features.cache_policy import (
    load_typed_tables,
)
from distgnn_workload.runtime.features.remote import (
    TypedFeatureSource,
    rpc_typed_fetch,
)
from distgnn_workload.runtime.features.serving import (
    serve_tables,
)
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.hetero_data import HeteroTrainingData, from_store, open_typed_store
from distgnn_workload.runtime.holder import device_feature_budget
from distgnn_workload.runtime.link_batches import link_edge_types, typed_train_pairs
from distgnn_workload.runtime.rendezvous import Group
from distgnn_workload.trainer.hetero_loop import HeteroTrainer
from distgnn_workload.trainer.link_loop import HeteroLinkTrainer, read_eval_splits
from distgnn_workload.trainer.pipelines import TypedRemotePipeline, typed_request
from distgnn_workload.trainer.rank import TrainerRank, TypedRank, input_dtype
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)


class TypedStart:
    """What a typed job's trainer loads and builds (see the module docstring)."""

    def __init__(self, proc: RoleProcess) -> None:
        self.proc = proc
        self.loaded: tuple[HeteroPartitionStore, HeteroTrainingData] | None = None
        self.tables: dict[str, FeatureTable] | None = None
        self.features: TypedFeatureSource | None = None
        self.remote: TypedRemotePipeline | None = None
        self.built: HeteroTrainer | None = None

    def load(self) -> None:
        proc, env, spec = self.proc, self.proc.env, self.proc.spec
        worker = env.worker_mode
        num_holders = env.num_trainers if worker else env.num_samplers
        store = open_typed_store(env.partition_dir, num_holders, worker_mode=worker)
        t0 = time.perf_counter()
        if worker:
            # loaded and served before the rendezvous: a peer's first request finds them
            self.tables = load_typed_tables(
                store,
                env.rank,
                spec.samplers.cache_ratio,
                proc.device,
                input_dtype(spec, proc.device),
                device_budget=device_feature_budget(spec, proc.device, 0),
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
        ppp = proc.env.procs_per_pod
        on_epoch: Callable[[], None] | None = None
        if self.tables is not None:

            def holder_name(h: int) -> str:
                return f"trainer-{h * ppp + proc.local_rank}"

            source = self.features = TypedFeatureSource(
                self.tables, rpc_typed_fetch(holder_name), peer_name=holder_name
            )

            def flush_feature_stats() -> None:
                for t, s in source.take().items():
                    metrics.typed_feature_stats(t, s.lookups, s.hits, s.bytes_fetched)
                    metrics.tier_stats(s.tier_rows, s.host_tier_rows)

            on_epoch = flush_feature_stats
        else:
            samplers = ", ".join(f"sampler-{h}" for h in at.holders())
            log.info("drawing typed batches from %s", samplers)
            self.remote = TypedRemotePipeline(
                typed_request,
                rank=at.rank,
                seed=spec.training.seed,
                device=at.device,
                prefetch=spec.trainers.prefetch,
                concurrency=spec.samplers.concurrency,
                on_batch=lambda wire: metrics.remote_bytes.inc(feature_bytes(wire)),
            )
        typed: TypedRank = replace(
            at,
            batches=self.remote,
            features=self.features,
            on_epoch=on_epoch,
            partition_dir=proc.env.partition_dir,
        )
        return typed

    def trainer(self, at: TypedRank) -> HeteroTrainer:
        spec = self.proc.spec
        assert self.loaded is not None, "load() first"
        store, data = self.loaded
        if spec.is_link_prediction:
            edge_type, reverse = link_edge_types(store.path)
            self.built = HeteroLinkTrainer(
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
