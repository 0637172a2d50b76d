"""The sampler server of a homogeneous job: serves sampled, feature-complete mini-batches over
torch RPC.

A trainer calls :func:`~distgnn_workload.runtime.batch_targets.serve_batch` with the seeds
of one mini-batch (all owned by this sampler, see :mod:`distgnn_workload.runtime.seeds`). The call returns at once with a future
(``rpc.functions.async_execution``); ``samplers.concurrency`` worker threads sample the
subgraph, gather its features (local rows, the hot cache, and other samplers over RPC for
the rest) and complete the future. RPC threads are therefore never blocked by sampling, and
a sampler fetching features from another sampler cannot deadlock with it.

A sampler instance is not thread-safe, so the server keeps a pool of ``concurrency``
samplers (:class:`~distgnn_workload.sampler.pool.SamplerPool`, shared with the typed
server), each with its own CUDA stream, built and prepared (their CUDA graphs captured,
one after the other) before the first request; a worker thread takes one from the pool for
each request. A failed request completes its future with a
:class:`~distgnn_workload.runtime.rpc.RemoteError` that names this sampler and carries the
traceback; the trainer raises it.

A trainer on this host maps shared slots of this process
(:mod:`~distgnn_workload.runtime.shared_slots`) and asks with
:func:`~distgnn_workload.runtime.batch_targets.serve_batch_into`: the mini-batch is written
into its slot and only the sizes go back over RPC.

Start-up and shutdown are the sampler process's (:mod:`distgnn_workload.sampler.process`);
:class:`NodeServing` is what a homogeneous job loads and serves in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload import metrics
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import link_batches, rpc_targets, shared_slots
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime.batch_targets import SAMPLER_SERVER
from distgnn_workload.runtime.wire import pack, pack_into, wire_bytes
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features import set_serve_observer
from distgnn_workload.runtime.link_batches import BatchSampler
from distgnn_workload.sampler.pool import SamplerPool
from distgnn_workload.sampling import NeighborSampler

log = logging.getLogger(__name__)


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


class NodeServing:
    """What a homogeneous job's sampler loads and serves in the sampler's start-up
    (:func:`distgnn_workload.sampler.process.main`): its partitions' holder and a
    :class:`SamplerServer` of the job's batches (node or link)."""

    graph_kind = "homogeneous"

    def __init__(self, proc: RoleProcess, device: torch.device) -> None:
        self.proc = proc
        self.device = device
        self.loaded: tuple[PartitionStore, holders.HolderState] | None = None
        self.server: SamplerServer | None = None

    def load(self, observe: Callable[[Tensor], None]) -> None:
        """Read this sampler's partitions (before the rendezvous)."""
        env, spec = self.proc.env, self.proc.spec
        store = self.proc.open_store()
        self.loaded = (store, holders.load(store, spec, env.rank, env.num_samplers, self.device))
        set_serve_observer(observe)

    def serve(self, ctx: rpc_runtime.RpcContext) -> None:
        """Connect the holder to its peers and register the server of the job's batches."""
        env, spec = self.proc.env, self.proc.spec
        assert self.loaded is not None, "load() first"
        store, state = self.loaded
        seed = spec.training.seed * 1_000 + env.rank
        holder = holders.connect(
            state,
            store,
            spec,
            ctx,
            lambda h: f"sampler-{h}",
            seed=seed,
            slots_per_peer=spec.samplers.concurrency + 1,
        )
        self.server = SamplerServer(
            holder,
            ctx,
            rank=env.rank,
            concurrency=spec.samplers.concurrency,
            seed=seed,
            batch_size=spec.training.batch_size,
            for_task=lambda sampler: link_batches.for_task(spec, sampler),
        )
        rpc_targets.register(SAMPLER_SERVER, self.server)

    def finish(self) -> None:
        if self.server is not None:
            self.server.update_cache_ratio()
        log.info("trainers finished; sampler %d exits", self.proc.env.rank)
