"""The sampler server of a heterogeneous job: typed mini-batches for the seeds a trainer sends.

Sampler ``h`` holds partition ``h`` of the typed store: the trainers drawing from it send
the target-type seeds that partition owns. As in worker mode, every sampler reads the
store's whole typed topology (replicated, memory-mapped), so sampling is local; per featured
node type it holds its partition's rows plus a hot cache of ``samplers.cacheRatio`` of the
other partitions' rows (the hottest by in-degree), answers the other samplers' requests for
its own rows and fetches the rest of a batch's rows from their owning samplers over RPC
(:func:`distgnn_workload.runtime.features.cache_policy.load_typed_tables`; none with a ratio of 1).
A link job's requests carry packed seed edges of its edge type instead, sampled by
:class:`~distgnn_workload.sampling.link_sampler.HeteroLinkSampler` (negatives,
exclusion of the batch's edges and reverses), and its batches carry no labels.
A request carries the seeds and a random-stream seed; the server restarts a sampler of its
pool on that stream, samples the typed neighbourhood at the resolved per-edge-type fanouts
with :class:`HeteroNeighborSampler`, gathers the featured types' rows and the seeds' labels
and returns a :data:`~distgnn_workload.runtime.batches.TypedWireBatch` (plain RPC
tensors, no shared slots). The same seeds on the same stream give the same batch, whichever
thread serves it and whichever sampler: a resumed run samples what an uninterrupted one did.

Embedding rows are not served here: the trainers own the learnt rows of featureless types
(:mod:`distgnn_workload.embeddings`) and look them up by the batch's node ids.

Requests run on ``samplers.concurrency`` threads, each taking a sampler from the pool
(:class:`~distgnn_workload.sampler.pool.SamplerPool`, shared with the homogeneous server;
an instance is not thread-safe); the RPC thread returns at once with a future, so a
sampling thread waiting for another sampler's rows never blocks the RPC threads that answer
feature requests. A failed request completes its future with a
:class:`~distgnn_workload.runtime.rpc.RemoteError` naming this sampler, which the trainer
raises. Start-up and the bounded shutdown are the sampler process's
(:mod:`distgnn_workload.sampler.process`); :class:`TypedServing` is what a typed job loads
and serves in between.
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
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.batch_targets import TYPED_SAMPLER_SERVER
from distgnn_workload.runtime.wire import (
    TypedWireBatch,
    pack_typed,
    wire_bytes,
)
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features.cache_policy import (
    held_bytes,
    load_typed_tables,
    whole_tables,
)
from distgnn_workload.runtime.features.remote import (
    TypedFeatureSource,
    rpc_typed_fetch,
)
from distgnn_workload.runtime.features.serving import (
    serve_tables,
    set_type_serve_observer,
)
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.hetero_data import HeteroTrainingData, from_store, open_typed_store
from distgnn_workload.runtime.holder import device_feature_budget
from distgnn_workload.runtime.link_batches import link_edge_types, link_sampler
from distgnn_workload.pinned_copies import to_host
from distgnn_workload.sampler.pool import SamplerPool
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler

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


class TypedServing:
    """What a typed job's sampler loads and serves in the sampler's start-up
    (:func:`distgnn_workload.sampler.process.main`): its partition's featured rows and hot
    cache, the whole typed topology and a :class:`HeteroSamplerServer`."""

    graph_kind = "typed"

    def __init__(self, proc: RoleProcess, device: torch.device) -> None:
        self.proc = proc
        self.device = device
        self.loaded: (
            tuple[HeteroPartitionStore, dict[str, FeatureTable], HeteroTrainingData] | None
        ) = None
        self.server: HeteroSamplerServer | None = None

    def load(self, observe: Callable[[Tensor], None]) -> None:
        """Read the typed store and serve this sampler's rows (before the rendezvous: a
        peer's first request finds them)."""
        env, spec = self.proc.env, self.proc.spec
        store = open_typed_store(env.partition_dir, env.num_samplers, worker_mode=False)
        t0 = time.perf_counter()
        # bf16 rows halve the bytes; admission allows bf16 only for GPU trainers
        dtype = torch.bfloat16 if spec.training.bf16 else torch.float32
        budget = device_feature_budget(spec, self.device, 0)
        tables = load_typed_tables(
            store, env.rank, spec.samplers.cache_ratio, self.device, dtype, budget
        )
        serve_tables(tables)
        set_type_serve_observer(lambda _node_type, rows: observe(rows))
        data = from_store(store, features=False)
        log.info(
            "typed graph: %s nodes, %d edge types; read in %.1f s; %.1f MiB of featured rows held",
            data.node_counts,
            len(data.edge_types),
            time.perf_counter() - t0,
            held_bytes(tables) / 2**20,
        )
        self.loaded = (store, tables, data)

    def serve(self, ctx: rpc_runtime.RpcContext) -> None:
        """Register the server of the job's typed batches (node or link)."""
        env, spec = self.proc.env, self.proc.spec
        assert self.loaded is not None, "load() first"
        store, tables, data = self.loaded

        def peer(h: int) -> str:
            return f"sampler-{h}"

        self.server = HeteroSamplerServer(
            data,
            spec,
            rank=env.rank,
            device=self.device,
            concurrency=spec.samplers.concurrency,
            wire=ctx.wire,
            cuda_wire=ctx.cuda,
            features=TypedFeatureSource(tables, rpc_typed_fetch(peer), peer_name=peer),
            link=link_edge_types(store.path) if spec.is_link_prediction else None,
        )
        rpc_targets.register(TYPED_SAMPLER_SERVER, self.server)

    def finish(self) -> None:
        rank, server = self.proc.env.rank, self.server
        if server is None:
            return
        server.update_cache_metrics()
        log.info(
            "typed sampler %d fetched featured rows from their owners: %s",
            rank,
            dict(server.features.fetched_rows),
        )
        log.info(
            "trainers finished; typed sampler %d served %d batches (%d seeds) and exits",
            rank,
            server.served,
            server.seeds_served,
        )
