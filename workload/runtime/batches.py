"""Mini-batch pipelines of a trainer: local sampling (worker mode) or sampler servers.

Both run an epoch's plan (:mod:`distgnn_workload.runtime.seeds`) through the loader's
:class:`~distgnn_workload.loader.Prefetcher`: a background thread on a side CUDA stream keeps
``trainers.prefetch`` finished mini-batches ahead of the training step, and the time the
step waits for one is the data wait. In worker mode that thread also samples a few batches
ahead of the one it finishes, so that the remote features of a batch are on their way
(one round of the trainers' feature exchange, only the ids missing from the cache) while the
next ones are sampled, and it ends each epoch or evaluation by serving its peers until all
are done (the exchange's phase). In server-client mode it keeps ``samplers.concurrency`` requests in flight to the
sampler servers; a server's failure is raised with the server's name and traceback.

On the wire a mini-batch is a plain tuple of tensors and ints (:func:`pack`), sampled
edges as int32 to halve their bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.loader import FeatureSource, MiniBatch, Prefetcher
from distgnn_workload.runtime.features.remote import PendingGather
from distgnn_workload.runtime.rpc import wait_remote
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.runtime.shared_slots import SlotReader, SlotSpec, take
from distgnn_workload.sampling import HopBatch, NeighborSampler, StaticLayout, pad_hops
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler

WireBatch = tuple[Any, ...]
"""(node_ids, edge_index int32, target_ptr, x, y, num_seeds, nodes per hop, edges per hop)."""

_INT32_MAX = 2**31 - 1


def pack(hop: HopBatch, x: Tensor, y: Tensor, wire: Callable[[Tensor], Tensor]) -> WireBatch:
    """A mini-batch as it travels from a sampler server to a trainer."""
    edge_index = hop.edge_index
    if hop.num_nodes <= _INT32_MAX:
        edge_index = edge_index.to(torch.int32)
    return (
        wire(hop.node_ids),
        wire(edge_index),
        wire(hop.get_target_ptr()),
        wire(x),
        wire(y),
        hop.num_seeds,
        list(hop.num_nodes_per_hop),
        list(hop.num_edges_per_hop),
    )


def unpack(batch: WireBatch, device: torch.device) -> MiniBatch:
    """The mini-batch a sampler server sent, on ``device``."""
    node_ids, edge_index, target_ptr, x, y, num_seeds, nodes, edges = batch

    def to(t: Tensor) -> Tensor:
        if device.type == "cuda" and t.device.type == "cpu":
            t = t.pin_memory()
        return t.to(device, non_blocking=True)

    hop = HopBatch(
        node_ids=to(node_ids),
        num_seeds=int(num_seeds),
        num_nodes_per_hop=[int(n) for n in nodes],
        num_edges_per_hop=[int(n) for n in edges],
        edge_index=to(edge_index).to(torch.int64),
        target_ptr=to(target_ptr),
    )
    return MiniBatch(hop=hop, x=to(x), y=to(y))


WireMeta = tuple[int, list[int], list[int]]
"""A mini-batch written into a shared slot: (num_seeds, nodes per hop, edges per hop)."""


def batch_slot_spec(layout: StaticLayout, num_features: int, dtype: torch.dtype) -> SlotSpec:
    """The shared slot a sampler server writes one mini-batch of ``layout`` into."""
    caps = layout.hop_caps
    return {
        "node_ids": ((layout.node_cap,), torch.int64),
        "edges": ((2, sum(caps[1:])), torch.int32),
        "ptr": ((sum(caps[:-1]) + 1,), torch.int64),
        "x": ((layout.node_cap, num_features), dtype),
        "y": ((layout.batch_size,), torch.int64),
    }


def pack_into(hop: HopBatch, x: Tensor, y: Tensor, buffers: dict[str, Tensor]) -> WireMeta:
    """Write a mini-batch into a shared slot; returns what the consumer needs to read it."""
    nodes, edges = hop.num_nodes, hop.num_edges
    ptr = hop.get_target_ptr()
    if nodes > buffers["node_ids"].numel() or edges > buffers["edges"].size(1):
        raise ValueError(f"a batch of {nodes} nodes and {edges} edges exceeds its slot")
    buffers["node_ids"][:nodes].copy_(hop.node_ids)
    buffers["edges"][:, :edges].copy_(hop.edge_index)
    buffers["ptr"][: ptr.numel()].copy_(ptr)
    buffers["x"][:nodes].copy_(x)
    buffers["y"][: y.numel()].copy_(y)
    return hop.num_seeds, list(hop.num_nodes_per_hop), list(hop.num_edges_per_hop)


def unpack_from(meta: WireMeta, buffers: dict[str, Tensor], device: torch.device) -> MiniBatch:
    """Copy a mini-batch out of a shared slot into tensors of this process on ``device``."""
    num_seeds, nodes_per_hop, edges_per_hop = meta
    nodes, edges = sum(nodes_per_hop), sum(edges_per_hop)
    targets = sum(nodes_per_hop[:-1])
    hop = HopBatch(
        node_ids=take(buffers["node_ids"][:nodes], device),
        num_seeds=int(num_seeds),
        num_nodes_per_hop=[int(n) for n in nodes_per_hop],
        num_edges_per_hop=[int(n) for n in edges_per_hop],
        edge_index=take(buffers["edges"][:, :edges], device).to(torch.int64),
        target_ptr=take(buffers["ptr"][: targets + 1], device),
    )
    return MiniBatch(
        hop=hop,
        x=take(buffers["x"][:nodes], device),
        y=take(buffers["y"][:num_seeds], device),
    )


def wire_bytes(batch: WireBatch) -> int:
    return sum(t.numel() * t.element_size() for t in batch if isinstance(t, Tensor))


LOOKAHEAD = 2
"""Batches a worker-mode pipeline samples (and sends feature requests for) ahead."""


def start_gather(features: FeatureSource, node_ids: Tensor) -> PendingGather:
    """Start gathering features: split in two where the source can (remote rows)."""
    start = getattr(features, "start", None)
    if start is not None:
        pending: PendingGather = start(node_ids)
        return pending
    return PendingGather(features.gather(node_ids))


class LocalPipeline:
    """Worker mode: sample this holder's seeds and gather features (local, cached, remote)."""

    def __init__(
        self,
        sampler: NeighborSampler | LinkNeighborSampler,
        features: FeatureSource,
        labels: Tensor,
        *,
        device: torch.device,
        prefetch: int,
        lookahead: int = LOOKAHEAD,
    ) -> None:
        self.sampler = sampler
        self.features = features
        self.labels = labels
        self.device = device
        self.prefetch = prefetch
        self.lookahead = max(0, lookahead)

    def start(self, seeds: Tensor) -> tuple[HopBatch, PendingGather, Tensor]:
        """Sample ``seeds``, gather what is at hand and send for the remote rows."""
        hop = self.sampler.sample(seeds).to(self.device, non_blocking=True)
        pending = start_gather(self.features, hop.node_ids)
        y = self.labels[hop.seed_ids.to(self.labels.device)].to(self.device, non_blocking=True)
        return hop, pending, y

    def produce(self, seeds: Tensor) -> MiniBatch:
        hop, pending, y = self.start(seeds)
        return MiniBatch(hop=hop, x=pending.wait(), y=y)

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[MiniBatch]:
        """The epoch's mini-batches; with ``static``, each also padded to that layout."""
        started: dict[int, tuple[HopBatch, PendingGather, Tensor]] = {}
        next_start = 0

        def produce(i: int) -> MiniBatch:
            nonlocal next_start
            while next_start < len(batches) and next_start <= i + self.lookahead:
                started[next_start] = self.start(batches[next_start][1])
                next_start += 1
            hop, pending, y = started.pop(i)
            batch = MiniBatch(hop=hop, x=pending.wait(), y=y)
            if static is not None:
                batch.static = pad_hops(hop, static)
            return batch

        # a feature exchange's phase ends with this rank serving its peers until all are done
        finish: Callable[[], None] | None = getattr(self.features, "finish_phase", None)
        if self.prefetch == 0:
            return Prefetcher(produce, len(batches), depth=0, device=self.device, finish=finish)
        return Prefetcher(
            produce,
            len(batches),
            depth=self.prefetch,
            device=self.device,
            record=MiniBatch.record_stream,
            finish=finish,
        )

    @property
    def moved_bytes(self) -> int:
        """Bytes of remote features this rank pulled since the start (0: none are remote)."""
        return int(getattr(self.features, "moved_bytes", 0))


Request = Callable[[int, Tensor], Future[WireBatch]]
"""Ask holder ``h`` for the mini-batch of ``seeds``."""
RequestInto = Callable[[int, int, Tensor], Future[WireMeta]]
"""Ask holder ``h`` to write the mini-batch of ``seeds`` into slot ``k`` of this process."""


class RemotePipeline:
    """Server-client mode: mini-batches come from the sampler servers over RPC.

    A server on this host writes them into shared slots of its own that this process mapped
    (``readers``, by holder; ``request_into`` asks for that): only sizes cross the wire.
    """

    def __init__(
        self,
        request: Request,
        *,
        device: torch.device,
        prefetch: int,
        concurrency: int,
        on_batch: Callable[[WireBatch], None] | None = None,
        readers: dict[int, SlotReader] | None = None,
        request_into: RequestInto | None = None,
        on_slot_batch: Callable[[MiniBatch], None] | None = None,
    ) -> None:
        self.request = request
        self.device = device
        self.prefetch = prefetch
        self.concurrency = max(1, concurrency)
        self.on_batch = on_batch
        self.readers = readers or {}
        self.request_into = request_into
        self.on_slot_batch = on_slot_batch

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[MiniBatch]:
        """The epoch's mini-batches; with ``static``, each also padded to that layout."""
        in_flight: dict[int, tuple[Future[Any], SlotReader | None, int]] = {}
        submitted = 0

        def submit(holder: int, seeds: Tensor) -> tuple[Future[Any], SlotReader | None, int]:
            reader = self.readers.get(holder)
            if reader is None or self.request_into is None:
                return self.request(holder, seeds), None, -1
            slot = reader.acquire()
            return self.request_into(holder, slot, seeds), reader, slot

        def produce(i: int) -> MiniBatch:
            nonlocal submitted
            while submitted < len(batches) and submitted < i + self.concurrency:
                holder, seeds = batches[submitted]
                in_flight[submitted] = submit(holder, seeds)
                submitted += 1
            fut, reader, slot = in_flight.pop(i)
            value = wait_remote(fut, f"sampler-{batches[i][0]}")
            if reader is None:
                if self.on_batch is not None:
                    self.on_batch(value)
                batch = unpack(value, self.device)
            else:
                batch = unpack_from(value, reader.buffers(slot), self.device)
                reader.release(slot)  # once the copies out of it have run
                if self.on_slot_batch is not None:
                    self.on_slot_batch(batch)
            if static is not None:
                batch.static = pad_hops(batch.hop, static)
            return batch

        return Prefetcher(
            produce,
            len(batches),
            depth=max(1, self.prefetch),
            device=self.device,
            record=MiniBatch.record_stream,
        )
