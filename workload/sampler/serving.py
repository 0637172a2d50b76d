"""What a sampler of each graph kind loads and serves between the sampler process's start-up
and shutdown (:mod:`distgnn_workload.sampler.process`), with the servers of
:mod:`distgnn_workload.sampler.server`.

- :class:`NodeServing`, a one-type graph: the holder of its partitions (connected to its
  peers once the rendezvous is done) and a :class:`~.server.SamplerServer`.
- :class:`TypedServing`, a typed graph: sampler ``h`` holds partition ``h`` of the typed
  store. As in worker mode, every sampler reads the store's whole typed topology
  (replicated, memory-mapped), so sampling is local; per featured node type it holds its
  partition's rows plus a hot cache of ``samplers.cacheRatio`` of the other partitions'
  rows (the hottest by in-degree), answers the other samplers' requests for its own rows
  and fetches the rest of a batch's rows from their owning samplers over RPC
  (:func:`distgnn_workload.runtime.features.cache_policy.load_typed_tables`; none with a
  ratio of 1); it serves a :class:`~.server.HeteroSamplerServer`.

Either loads before the rendezvous, so that a peer's first request finds its rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch
from torch import Tensor

from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import link_batches, rpc_targets
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime.batch_targets import SAMPLER_SERVER, TYPED_SAMPLER_SERVER
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.features import set_serve_observer
from distgnn_workload.runtime.features.cache_policy import held_bytes, load_typed_tables
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.features.requests import rpc_typed_fetch
from distgnn_workload.runtime.features.serving import serve_tables, set_type_serve_observer
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.holder import device_feature_budget
from distgnn_workload.runtime.link_batches import link_edge_types
from distgnn_workload.runtime.training_data import HeteroTrainingData, from_store, open_typed_store
from distgnn_workload.sampler.server import HeteroSamplerServer, SamplerServer

log = logging.getLogger(__name__)


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
