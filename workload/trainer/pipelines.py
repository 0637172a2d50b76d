"""Where a trainer's mini-batches come from: its own holder (worker mode) or sampler servers.

Worker mode samples this pod's partitions and gathers features (local, cached, and remote
rows over the trainers' feature exchange: collectives on a process group of their own).
Server-client mode asks the sampler servers this rank draws from (see
:func:`~distgnn_workload.runtime.seeds.local_ranks`: the sampler on its own GPU, else on
its node); a server on this host writes each mini-batch into a shared slot of its own that
this process mapped, so only sizes cross RPC. Slots are mapped only in the samplers this
rank draws from: mapping another GPU's memory would open a CUDA context on that GPU.

A typed job's server-client trainer asks the same samplers for typed batches
(:class:`~distgnn_workload.runtime.remote_batches.TypedRemotePipeline`). This module wires
the pipelines of :mod:`~distgnn_workload.runtime.batches` and
:mod:`~distgnn_workload.runtime.remote_batches` to this job's holders, RPC targets and
metrics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.loader import MiniBatch
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import link_batches
from distgnn_workload.runtime.batch_targets import serve_batch, serve_batch_into, serve_typed_batch
from distgnn_workload.runtime.batches import LocalPipeline
from distgnn_workload.runtime.ddp import DDP_TIMEOUT_S
from distgnn_workload.runtime.features.exchange import FeatureExchange
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.features.requests import rpc_typed_fetch
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.remote_batches import RemotePipeline, RequestInto, TypedRemotePipeline
from distgnn_workload.runtime.rendezvous import Group
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.runtime.shared_slots import SlotReader
from distgnn_workload.runtime.wire import (
    TypedWireBatch,
    WireBatch,
    WireMeta,
    batch_slot_spec,
    feature_bytes,
)
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)


def place(group: Group, name: str) -> tuple[str, str]:
    """A member's (node, GPU): what locality compares."""
    placement = group.placement_of(name)
    return (placement.node, placement.gpu)


@dataclass
class TrainerPipeline:
    """A rank's data pipeline, and what to call after each epoch (metrics it buffers)."""

    pipeline: LocalPipeline | RemotePipeline
    after_epoch: Callable[[], None] | None = None

    def prepare(self, batch_size: int) -> None:
        """Capture a local sampler's CUDA graph now, not on the loader thread mid-epoch."""
        if isinstance(self.pipeline, LocalPipeline):
            self.pipeline.sampler.prepare(batch_size)


def worker_pipeline(
    state: holders.HolderState,
    store: PartitionStore,
    spec: DistGNNJobSpec,
    ctx: RpcContext,
    *,
    rank: int,
    procs_per_pod: int,
    local_rank: int,
    metrics: TrainerMetrics,
) -> TrainerPipeline:
    """Worker mode: sample this pod's partitions here; rows of the others come over the
    trainers' feature exchange (every trainer calls this, in the same order)."""
    holder = holders.connect(
        state,
        store,
        spec,
        ctx,
        lambda h: f"trainer-{h * procs_per_pod + local_rank}",
        seed=spec.training.seed * 1_000 + rank,
        exchange=feature_exchange(state, rank=rank, procs_per_pod=procs_per_pod),
    )
    pipeline = LocalPipeline(
        link_batches.for_task(spec, holder.new_sampler(spec.training.seed * 1_000 + rank)),
        holder.features,
        state.labels,
        device=state.device,
        prefetch=spec.trainers.prefetch,
    )

    def flush_feature_stats() -> None:
        metrics.feature_stats(*holder.features.stats.take())
        metrics.tier_stats(*holder.features.stats.take_tiers())

    return TrainerPipeline(pipeline, flush_feature_stats)


def feature_exchange(
    state: holders.HolderState, *, rank: int, procs_per_pod: int
) -> FeatureExchange | None:
    """The trainers' feature exchange on a process group of its own; None with one holder."""
    if state.layout.num_holders < 2 or not dist.is_initialized():
        return None
    return _exchange(
        state.table, state.layout, state.layout.num_holders, rank % procs_per_pod, procs_per_pod
    )


def _exchange(
    table: FeatureTable,
    layout: HolderLayout | None,
    num_holders: int,
    local_rank: int,
    procs_per_pod: int,
) -> FeatureExchange:
    """An exchange of ``table``'s rows on a new process group (a collective call: every
    trainer makes it, in the same order as its other groups).

    Rank r asks holder h's process of its own local rank: ``h * procs_per_pod + r % ppp``.
    """
    return FeatureExchange.on_new_group(
        table,
        layout,
        [h * procs_per_pod + local_rank for h in range(num_holders)],
        DDP_TIMEOUT_S,
    )


def server_pipeline(
    spec: DistGNNJobSpec,
    group: Group,
    *,
    samplers: list[int],
    num_features: int,
    device: torch.device,
    metrics: TrainerMetrics,
) -> TrainerPipeline:
    """Server-client mode: mini-batches from the sampler servers ``samplers``."""
    log.info("drawing mini-batches from %s", ", ".join(f"sampler-{h}" for h in samplers))

    def on_batch(wire: WireBatch) -> None:
        x = wire[3]
        metrics.remote_bytes.inc(x.numel() * x.element_size())

    def on_slot_batch(batch: MiniBatch) -> None:
        metrics.remote_bytes.inc(batch.x.numel() * batch.x.element_size())

    me = group.me.name
    pipeline = RemotePipeline(
        _request,
        device=device,
        prefetch=spec.trainers.prefetch,
        concurrency=spec.samplers.concurrency,
        on_batch=on_batch,
        readers=_slots(spec, samplers, me, num_features, device),
        request_into=_request_into(me),
        on_slot_batch=on_slot_batch,
    )
    return TrainerPipeline(pipeline)


def _request(holder: int, seeds: Tensor) -> Future[WireBatch]:
    fut: Future[WireBatch] = rpc.rpc_async(f"sampler-{holder}", serve_batch, args=(seeds,))
    return fut


def _request_into(me: str) -> RequestInto:
    def request(holder: int, slot: int, seeds: Tensor) -> Future[WireMeta]:
        fut: Future[WireMeta] = rpc.rpc_async(
            f"sampler-{holder}", serve_batch_into, args=(me, slot, seeds)
        )
        return fut

    return request


def _slots(
    spec: DistGNNJobSpec,
    samplers: list[int],
    me: str,
    num_features: int,
    device: torch.device,
) -> dict[int, SlotReader]:
    """Shared slots in the sampler servers ``samplers`` that share this host."""
    if any(k < 1 for k in spec.model.fanout):
        return {}  # no bound on a batch's size: batches come over RPC
    layout = StaticLayout(link_batches.seed_rows(spec), tuple(spec.model.fanout))
    dtype = torch.bfloat16 if spec.training.bf16 else torch.float32
    slot_spec = batch_slot_spec(layout, num_features, dtype)
    count = spec.samplers.concurrency + 1
    readers = {}
    for h in samplers:
        reader = SlotReader.attach(f"sampler-{h}", me, slot_spec, count, device)
        if reader is not None:
            readers[h] = reader
    return readers


def typed_worker_features(
    tables: dict[str, FeatureTable],
    metrics: TrainerMetrics,
    num_holders: int,
    procs_per_pod: int,
    local_rank: int,
) -> tuple[TypedFeatureSource, Callable[[], None]]:
    """Worker mode of a typed job: the featured rows of every type from this pod's tables,
    the rest from their owners over the trainers' feature exchange, one per featured type
    on a group of its own (over RPC where there is no process group); and what flushes its
    metrics after each epoch."""

    def holder_name(h: int) -> str:
        return f"trainer-{h * procs_per_pod + local_rank}"

    source = TypedFeatureSource(tables, rpc_typed_fetch(holder_name), peer_name=holder_name)
    if num_holders > 1 and dist.is_initialized():
        # the tables' order is the store's node types': the same groups in the same order
        # on every rank
        source.use(
            {
                t: _exchange(table, None, num_holders, local_rank, procs_per_pod)
                for t, table in tables.items()
            }
        )

    def flush_feature_stats() -> None:
        for t, s in source.take().items():
            metrics.typed_feature_stats(t, s.lookups, s.hits, s.bytes_fetched)
            metrics.tier_stats(s.tier_rows, s.host_tier_rows)

    return source, flush_feature_stats


def typed_server_pipeline(
    spec: DistGNNJobSpec,
    *,
    samplers: list[int],
    rank: int,
    device: torch.device,
    metrics: TrainerMetrics,
) -> TypedRemotePipeline:
    """Server-client mode of a typed job: typed batches from the sampler servers ``samplers``."""
    log.info("drawing typed batches from %s", ", ".join(f"sampler-{h}" for h in samplers))
    return TypedRemotePipeline(
        typed_request,
        rank=rank,
        seed=spec.training.seed,
        device=device,
        prefetch=spec.trainers.prefetch,
        concurrency=spec.samplers.concurrency,
        on_batch=lambda wire: metrics.remote_bytes.inc(feature_bytes(wire)),
    )


def typed_request(holder: int, seeds: Tensor, stream: int) -> Future[TypedWireBatch]:
    """Ask sampler ``holder`` for the typed batch of ``seeds`` on the random stream ``stream``."""
    fut: Future[TypedWireBatch] = rpc.rpc_async(
        f"sampler-{holder}", serve_typed_batch, args=(seeds, stream)
    )
    return fut
