"""The sampler servers: sampled, feature-complete mini-batches over torch RPC, for the seeds a
trainer sends (all owned by this sampler, see :mod:`distgnn_workload.runtime.seeds`).

The call returns at once with a future (``rpc.functions.async_execution``);
``samplers.concurrency`` worker threads sample the subgraph, gather its features (local rows,
the hot cache, and other samplers over RPC for the rest) and complete the future. RPC
threads are therefore never blocked by sampling, and a sampler fetching features from
another sampler cannot deadlock with it. A sampler instance is not thread-safe, so each
server keeps a pool of ``concurrency`` samplers
(:class:`~distgnn_workload.sampler.pool.SamplerPool`), each with its own CUDA stream, built
and prepared (their CUDA graphs captured, one after the other) before the first request. A
failed request completes its future with a :class:`~distgnn_workload.runtime.rpc.RemoteError`
that names this sampler and carries the traceback; the trainer raises it.

- :class:`SamplerServer`, a one-type graph
  (:func:`~distgnn_workload.runtime.batch_targets.serve_batch`): a trainer on this host maps
  shared slots of this process (:mod:`~distgnn_workload.runtime.shared_slots`) and asks with
  :func:`~distgnn_workload.runtime.batch_targets.serve_batch_into`: the mini-batch is
  written into its slot and only the sizes go back over RPC.
- :class:`HeteroSamplerServer`, a typed graph
  (:func:`~distgnn_workload.runtime.batch_targets.serve_typed_batch`): a request carries the
  target-type seeds (a link job's: packed seed edges of its edge type, sampled by
  :class:`~distgnn_workload.sampling.link_sampler.HeteroLinkSampler`, with no labels) and a
  random-stream seed; the server restarts a sampler of its pool on that stream, samples the
  typed neighbourhood at the resolved per-edge-type fanouts, gathers the featured types'
  rows and returns a :data:`~distgnn_workload.runtime.wire.TypedWireBatch` (plain RPC
  tensors, no shared slots). The same seeds on the same stream give the same batch,
  whichever thread and sampler serve it: a resumed run samples what an uninterrupted one
  did. Embedding rows are not served here: the trainers own the learnt rows of featureless
  types (:mod:`distgnn_workload.embeddings`).

What each graph kind loads before it serves is :mod:`distgnn_workload.sampler.serving`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_api.edge_types import EdgeType
from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload import metrics
from distgnn_workload.pinned_copies import to_host
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime import shared_slots
from distgnn_workload.runtime.features.cache_policy import whole_tables
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.link_batches import BatchSampler, link_sampler
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.runtime.wire import TypedWireBatch, pack, pack_into, pack_typed, wire_bytes
from distgnn_workload.sampler.pool import SamplerPool
from distgnn_workload.sampling import HeteroNeighborSampler, NeighborSampler

log = logging.getLogger(__name__)

CSR = tuple[Tensor, Tensor]
_INT32_MAX = 2**31 - 1


def shared_topology(data: HeteroTrainingData, device: torch.device) -> dict[EdgeType, CSR]:
    """The typed in-CSR on ``device``, the neighbour lists in the dtype the sampler keeps,
    so that the samplers of a pool share one copy of them (only ``indptr`` is per sampler)."""
    out: dict[EdgeType, CSR] = {}
    for et in data.edge_types:
        indptr, indices = data.in_csr[et]
        dtype = torch.int32 if data.node_counts[et[0]] <= _INT32_MAX else torch.int64
        out[et] = (indptr.to(device), indices.to(device, dtype))
    return out


class SamplerServer(SamplerPool[BatchSampler]):
    """Serves mini-batch requests from a pool of sampling threads."""

    def __init__(
        self,
        holder: holders.Holder,
        ctx: rpc_runtime.RpcContext,
        *,
        rank: int,
        concurrency: int,
        seed: int,
        batch_size: int,
        for_task: Callable[[NeighborSampler], BatchSampler] | None = None,
    ) -> None:
        super().__init__(rank=rank, device=holder.state.device, concurrency=concurrency)
        self.holder = holder
        self.for_task = for_task or (lambda sampler: sampler)
        self.ctx = ctx
        self.seed = seed
        self.labels = holder.state.labels
        for k in range(self.concurrency):
            self.add(self.for_task(holder.new_sampler(seed * 7_919 + k)), batch_size)
        self._lookups = 0
        self._hits = 0

    def submit(self, seeds: Tensor, into: tuple[str, int] | None = None) -> Future[Any]:
        """The mini-batch of ``seeds`` (or, ``into=(consumer, slot)``, its sizes once it is
        written into that consumer's shared slot)."""
        cuda_wire = self.ctx.cuda and into is None
        devices: list[int | str | torch.device] | None = [self.device] if cuda_wire else None
        fut: Future[Any] = Future(devices=devices)
        self.executor.submit(self._run, seeds, fut, time.perf_counter(), into)
        return fut

    def _run(
        self, seeds: Tensor, fut: Future[Any], t0: float, into: tuple[str, int] | None = None
    ) -> None:
        try:
            with self.slot() as slot:
                hop = slot.sampler.sample(seeds)
                x = self.holder.features.gather(hop.node_ids)
                y = self.labels[hop.seed_ids]
                if into is None:
                    wire: Any = pack(hop, x, y, self.ctx.wire)
                    sent = wire_bytes(wire)
                else:
                    wire = pack_into(hop, x, y, shared_slots.owner().buffers(*into))
                    sent = x.numel() * x.element_size() + hop.edge_index.numel() * 4
                    if slot.stream is not None:
                        slot.stream.synchronize()  # written before the consumer reads it
                fut.set_result(wire)
        except BaseException as err:
            log.exception("mini-batch request failed")
            if not fut.done():
                # an exception set on the future would reach the trainer as a plain value
                fut.set_result(rpc_runtime.RemoteError.of(err, self.name))
            return
        if self.count(t0, sent, int(seeds.numel())):
            self.update_cache_ratio()

    def update_cache_ratio(self) -> None:
        lookups, hits, _ = self.holder.features.stats.take()
        self.count_tiers(*self.holder.features.stats.take_tiers())
        with self._lock:
            self._lookups += lookups
            self._hits += hits
            if not self._lookups:
                return  # no look-up yet: no ratio to report
            ratio = self._hits / self._lookups
        metrics.SAMPLER_CACHE_HIT_RATIO.labels(str(self.rank)).set(ratio)


class HeteroSamplerServer(SamplerPool[HeteroNeighborSampler]):
    """Serves typed mini-batch requests from a pool of sampling threads."""

    def __init__(
        self,
        data: HeteroTrainingData,
        spec: DistGNNJobSpec,
        *,
        rank: int,
        device: torch.device,
        concurrency: int,
        wire: Callable[[Tensor], Tensor] | None = None,
        cuda_wire: bool = False,
        features: TypedFeatureSource | None = None,
        link: tuple[EdgeType, EdgeType | None] | None = None,
    ) -> None:
        """``features``: this sampler's typed rows (its partition's, its hot cache and the
        other samplers' over RPC); None: every row of ``data.x``, held here. ``link``: a
        link job's supervised edge type and the one holding its reverses; requests then
        carry packed seed edges, and batches no labels."""
        super().__init__(rank=rank, device=device, concurrency=concurrency)
        self.seed_type = data.target_node_type
        self.cuda_wire = cuda_wire
        self._wire = wire or to_host
        fanouts = resolve_edge_fanouts(spec.model.fanout, spec.model.edge_fanouts, data.edge_types)
        if features is None:
            # bf16 rows halve the bytes; admission allows bf16 only for GPU trainers
            dtype = torch.bfloat16 if spec.training.bf16 else torch.float32
            features = TypedFeatureSource(whole_tables(data.x, device, dtype))
        self.features = features
        self.y = data.y.to(device)
        in_csr = shared_topology(data, device)
        self.link = link
        for _ in range(self.concurrency):
            sampler: HeteroNeighborSampler
            if link is not None:
                sampler = link_sampler(spec, data, in_csr, *link, device)
            else:
                sampler = HeteroNeighborSampler(
                    in_csr,
                    data.node_counts,
                    {et: list(fanouts[et]) for et in data.edge_types},
                    seed_type=self.seed_type,
                    device=device,
                )
            self.add(sampler, spec.training.batch_size)
        self._lookups = dict.fromkeys(features.tables, 0)
        self._hits = dict.fromkeys(features.tables, 0)

    def submit(self, seeds: Tensor, stream_seed: int) -> Future[TypedWireBatch]:
        """The typed mini-batch of ``seeds`` sampled on the stream ``stream_seed``."""
        devices: list[int | str | torch.device] | None = [self.device] if self.cuda_wire else None
        fut: Future[TypedWireBatch] = Future(devices=devices)
        self.executor.submit(self._run, seeds, stream_seed, fut, time.perf_counter())
        return fut

    def sample(self, seeds: Tensor, stream_seed: int) -> TypedWireBatch:
        """Sample and gather one batch now, on this thread (what a request runs)."""
        with self.slot() as slot:
            slot.sampler.reseed(stream_seed)
            hop = slot.sampler.sample(seeds.to(self.device))
            x = {t: self.features.gather(t, hop.node_ids[t]) for t in self.features.tables}
            y = self.y[:0] if self.link is not None else self.y[hop.seed_ids]
            wire = pack_typed(hop, x, y, self._wire)
            if slot.stream is not None:
                slot.stream.synchronize()  # done before the RPC agent reads it
        return wire

    def _run(self, seeds: Tensor, stream_seed: int, fut: Future[Any], t0: float) -> None:
        try:
            wire = self.sample(seeds, stream_seed)
        except BaseException as err:
            log.exception("typed mini-batch request failed")
            # an exception set on the future would reach the trainer as a plain value
            fut.set_result(rpc_runtime.RemoteError.of(err, self.name))
            return
        # counted before the trainer can see the batch
        if self.count(t0, wire_bytes(wire), int(seeds.numel())):
            self.update_cache_metrics()
        fut.set_result(wire)

    def update_cache_metrics(self) -> None:
        """Count, per featured node type, the look-ups of other partitions' rows since the
        last call and those the hot cache served; set the hit ratio since the start."""
        label = str(self.rank)
        for t, s in self.features.take().items():
            if s.tier_rows:
                self.count_tiers(s.tier_rows, s.host_tier_rows)
            if not s.lookups:
                continue
            metrics.SAMPLER_TYPED_FEATURE_LOOKUPS.labels(label, t).inc(s.lookups)
            metrics.SAMPLER_TYPED_FEATURE_CACHE_HITS.labels(label, t).inc(s.hits)
            with self._lock:
                self._lookups[t] += s.lookups
                self._hits[t] += s.hits
                ratio = self._hits[t] / self._lookups[t]
            metrics.SAMPLER_TYPED_FEATURE_CACHE_HIT_RATIO.labels(label, t).set(ratio)
