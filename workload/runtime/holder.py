"""A holder's state: its partitions, the labels, the feature table, sampler and cache.

Shared by the sampler server (server-client mode) and the trainer in worker mode. Loading
(:func:`load`) happens before the rendezvous, so that a peer's requests find the data in
place; :func:`connect` then wires the RPC parts (serving features and one-hop samples), the
distributed feature source and the hot-feature cache filled from the peers: over the
trainers' feature exchange in worker mode, over RPC between sampler servers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import link_batches
from distgnn_workload.runtime.device_budget import device_budget
from distgnn_workload.runtime.distributed_sampler import (
    HopByHopSampler,
    SamplerFactory,
    free_memory,
    replicated_factory,
    rpc_hop_fetch,
    serve_local_csr,
    should_replicate,
    topology_bytes,
)
from distgnn_workload.runtime.features import (
    DistributedFeatureSource,
    FeatureExchange,
    FeatureTable,
    HolderData,
    HolderLayout,
    feature_slot_spec,
    fill_cache,
    fill_cache_from,
    load_holder,
    load_labels,
    presample_counts,
    rpc_fetch,
    rpc_fetch_into,
    select_hot,
    serve_table,
)
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.runtime.shared_slots import SlotOwner, SlotReader, serve_slots, slot_bytes
from distgnn_workload.runtime.training_data import check_store
from distgnn_workload.sampling import StaticLayout

log = logging.getLogger(__name__)

PRESAMPLE_BATCHES = 64
"""Mini-batches sampled at start-up to rank remote nodes by hotness."""


def device_feature_budget(spec: DistGNNJobSpec, device: torch.device, other: int) -> int | None:
    """Bytes of the feature table this holder's GPU may hold (``samplers.featureMemory``);
    None: no cap (no budget set, or a CPU holder)."""
    return device_budget(
        spec.samplers.feature_memory, device, other, field="spec.samplers.featureMemory"
    )


@dataclass
class HolderState:
    """What a holder loaded before the rendezvous."""

    data: HolderData
    layout: HolderLayout
    labels: Tensor
    table: FeatureTable
    replicate: bool
    device: torch.device


def load(
    store: PartitionStore,
    spec: DistGNNJobSpec,
    holder: int,
    num_holders: int,
    device: torch.device,
) -> HolderState:
    t0 = time.perf_counter()
    check_store(store, spec, num_holders)
    layout = HolderLayout.from_store(store, num_holders)
    dtype = torch.bfloat16 if spec.training.bf16 else torch.float32
    topo = topology_bytes(store)
    replicate = should_replicate(spec.samplers.replicate_topology, topo, device)
    budget = device_feature_budget(spec, device, topo if replicate else 0)
    # a budget keeps the rows on the host until the table places them
    data = load_holder(
        store, holder, num_holders, torch.device("cpu") if budget is not None else device, dtype
    )
    labels = load_labels(store, device)
    cached = round(spec.samplers.cache_ratio * (layout.num_nodes - (data.end - data.start)))
    table = FeatureTable.for_holder(
        data,
        layout.num_nodes,
        device,
        device_budget=budget,
        capacity=data.end - data.start + cached,
    )
    log.info(
        "holder %d: nodes [%d, %d) of %d, %d train, loaded in %.1fs",
        holder,
        data.start,
        data.end,
        layout.num_nodes,
        data.train_ids.numel(),
        time.perf_counter() - t0,
    )
    return HolderState(data, layout, labels, table, replicate, device)


@dataclass
class Holder:
    """A connected holder: sample with ``new_sampler``, gather with ``features``."""

    state: HolderState
    features: DistributedFeatureSource
    new_sampler: SamplerFactory


def connect(
    state: HolderState,
    store: PartitionStore,
    spec: DistGNNJobSpec,
    ctx: RpcContext,
    target_of_holder: Callable[[int], str],
    *,
    seed: int,
    slots_per_peer: int = 4,
    exchange: FeatureExchange | None = None,
) -> Holder:
    """Serve this holder's data over RPC, build its sampler, fill the hot-feature cache.

    With an ``exchange`` (worker mode) the cache is filled and the missing rows are fetched
    over its collectives. Without one, the rows of other holders come over RPC, and with a
    partial cache those of holders on this host through shared slots (``slots_per_peer``
    each: one per request a process may have in flight, plus one).
    """
    fanouts = list(spec.model.fanout)
    me = ctx.group.me.name
    serve_slots(SlotOwner(state.device, f"{ctx.group.generation[:8]}-{me}"))
    serve_table(state.table, ctx)
    if state.replicate:
        new_sampler = replicated_factory(store, fanouts, state.device)
    else:
        serve_local_csr(state.data, ctx, fanouts)
        hop_fetch = rpc_hop_fetch(target_of_holder)

        def new_sampler(s: int) -> HopByHopSampler:
            return HopByHopSampler(
                state.data, state.layout, fanouts, hop_fetch, device=state.device, seed=s
            )

    fetch = rpc_fetch(ctx, target_of_holder)
    features = DistributedFeatureSource(
        state.table,
        state.layout,
        fetch,
        holder=state.data.holder,
        peer_name=target_of_holder,
    )
    ratio = spec.samplers.cache_ratio
    budget = round(ratio * state.table.num_remote)
    t0 = time.perf_counter()
    hot: Tensor | None = None
    counts: Tensor | None = None
    if 0 < budget < state.table.num_remote or state.table.tiered:
        # GLT's hotness: it ranks the remote rows to cache and the rows the GPU keeps
        sampler = new_sampler(seed + 7_777)
        counts = presample_counts(
            lambda seeds: sampler.sample(seeds).node_ids,
            state.data.train_ids,
            state.layout.num_nodes,
            batch_size=spec.training.batch_size,
            max_batches=PRESAMPLE_BATCHES,
            seed=seed,
            device=state.device,
        )
    if budget > 0:
        if budget >= state.table.num_remote:
            hot = select_hot(
                torch.zeros(state.layout.num_nodes, dtype=torch.int64),
                None,
                state.data.start,
                state.data.end,
                budget,
            )
        else:
            assert counts is not None
            degrees = None
            if state.replicate:
                indptr, _ = store.topology()
                degrees = torch.from_numpy(indptr[1:] - indptr[:-1])
            hot = select_hot(counts, degrees, state.data.start, state.data.end, budget)
    if exchange is not None:
        # one phase of the exchange on every rank, with or without a budget
        none = torch.empty(0, dtype=torch.int64)
        fill_cache_from(state.table, exchange.fetch_all, none if hot is None else hot)
        log.info("hot-feature cache filled in %.1fs", time.perf_counter() - t0)
        state.table.place(counts)
        features.use(exchange)
    else:
        if hot is not None:
            fill_cache(state.table, state.layout, fetch, hot, peer_name=target_of_holder)
            log.info("hot-feature cache filled in %.1fs", time.perf_counter() - t0)
        state.table.place(counts)
    if exchange is None and not state.table.complete:
        attach_feature_slots(features, spec, me, target_of_holder, slots_per_peer)
    return Holder(state=state, features=features, new_sampler=new_sampler)


SLOT_MEMORY_SHARE = 0.05
"""Shared slots for one peer may take at most this share of the device's memory."""


def attach_feature_slots(
    features: DistributedFeatureSource,
    spec: DistGNNJobSpec,
    me: str,
    target_of_holder: Callable[[int], str],
    count: int,
) -> None:
    """Map slots in every other holder for the rows a batch misses (same host only)."""
    fanouts = list(spec.model.fanout)
    if any(k < 1 for k in fanouts):
        return  # no bound on a batch's rows: they come over RPC
    rows = StaticLayout(link_batches.seed_rows(spec), tuple(fanouts)).node_cap
    table = features.table
    slot_spec = feature_slot_spec(rows, table.num_features, table.dtype)
    if slot_bytes(slot_spec) * count > SLOT_MEMORY_SHARE * device_memory(table.device):
        log.info("remote rows come over RPC: shared slots would take too much memory")
        return
    for h in range(features.num_holders):
        if h != features.holder:
            reader = SlotReader.attach(target_of_holder(h), me, slot_spec, count, table.device)
            if reader is not None:
                features.readers[h] = reader
    features.fetch_into = rpc_fetch_into(me, target_of_holder)


def device_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return free_memory(device)
