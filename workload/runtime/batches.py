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
edges as int32 to halve their bytes. A typed mini-batch (:func:`pack_typed`) is a plain
tuple of dicts of tensors, ints and lists, as torch RPC carries them (tensors out of band)::

    (seed_type, num_seeds,
     node_ids        {node type: int64 global ids},
     nodes_per_hop   {node type: [L + 1 ints]},
     edge_index      {edge type: int32 [2, E]  (int64 when a type has >= 2^31 nodes)},
     edges_per_hop   {edge type: [L ints]},
     target_ptr      {edge type: int64 CSR offsets},
     x               {featured node type: rows of node_ids[t], in node_ids order},
     y               int64 labels of the seeds)

Only the featured types' rows travel: the rows of featureless types are learnt embeddings
that stay with the trainers (:mod:`distgnn_workload.embeddings`), which look them up by the
node ids of the batch. Typed batches travel as RPC tensors (on the device with CUDA RPC,
else on the host); there is no shared-slot path for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.loader import FeatureSource, MiniBatch, Prefetcher
from distgnn_workload.runtime.features.remote import PendingGather
from distgnn_workload.runtime.rpc import wait_remote
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.runtime.shared_slots import SlotReader, SlotSpec, take
from distgnn_workload.sampling import HopBatch, NeighborSampler, StaticLayout, pad_hops
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler

WireBatch = tuple[Any, ...]
"""(node_ids, edge_index int32, target_ptr, x, y, num_seeds, nodes per hop, edges per hop)."""
TypedWireBatch = tuple[Any, ...]
"""(seed_type, num_seeds, node_ids, nodes_per_hop, edge_index, edges_per_hop, target_ptr,
x, y): see the module docstring."""

_INT32_MAX = 2**31 - 1


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """A received tensor on ``device``: host tensors are pinned first, so the copy is
    asynchronous."""
    if device.type == "cuda" and t.device.type == "cpu":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


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
        return to_device(t, device)

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


def pack_typed(
    hop: HeteroHopBatch, x: dict[str, Tensor], y: Tensor, wire: Callable[[Tensor], Tensor]
) -> TypedWireBatch:
    """A typed mini-batch as it travels from a sampler server to a trainer."""
    narrow = all(n <= _INT32_MAX for n in hop.num_nodes.values())
    return (
        hop.seed_type,
        hop.num_seeds,
        {t: wire(v) for t, v in hop.node_ids.items()},
        {t: list(n) for t, n in hop.num_nodes_per_hop.items()},
        {et: wire(v.to(torch.int32) if narrow else v) for et, v in hop.edge_index.items()},
        {et: list(n) for et, n in hop.num_edges_per_hop.items()},
        {et: wire(v) for et, v in hop.target_ptr.items()},
        {t: wire(v) for t, v in x.items()},
        wire(y),
    )


def unpack_typed(
    batch: TypedWireBatch, device: torch.device
) -> tuple[HeteroHopBatch, dict[str, Tensor], Tensor]:
    """The typed mini-batch a sampler server sent, on ``device``: (hop, x, y)."""
    seed_type, num_seeds, node_ids, nodes, edge_index, edges, target_ptr, x, y = batch

    def to(t: Tensor) -> Tensor:
        return to_device(t, device)

    hop = HeteroHopBatch(
        seed_type=str(seed_type),
        num_seeds=int(num_seeds),
        node_ids={t: to(v) for t, v in node_ids.items()},
        num_nodes_per_hop={t: [int(k) for k in n] for t, n in nodes.items()},
        edge_index={et: to(v).to(torch.int64) for et, v in edge_index.items()},
        num_edges_per_hop={et: [int(k) for k in n] for et, n in edges.items()},
        target_ptr={et: to(v) for et, v in target_ptr.items()},
    )
    return hop, {t: to(v) for t, v in x.items()}, to(y)


def wire_bytes(batch: WireBatch | TypedWireBatch) -> int:
    """Tensor bytes of a wire batch of either kind (what the bytes-sent counter counts)."""
    total = 0
    for part in batch:
        tensors = part.values() if isinstance(part, dict) else (part,)
        total += sum(t.numel() * t.element_size() for t in tensors if isinstance(t, Tensor))
    return total


def feature_bytes(batch: TypedWireBatch) -> int:
    """Bytes of the featured types' rows in a typed wire batch."""
    return sum(t.numel() * t.element_size() for t in batch[7].values())


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


T = TypeVar("T")


def requests_ahead(
    batches: Sequence[Batch], concurrency: int, submit: Callable[[int, int, Tensor], T]
) -> Callable[[int], T]:
    """Batch ``i``'s request, taken in order, with the requests of the batches after it sent
    ahead so that ``concurrency`` are in flight; ``submit(index, holder, seeds)`` sends one."""
    in_flight: dict[int, T] = {}
    submitted = 0

    def take(i: int) -> T:
        nonlocal submitted
        while submitted < len(batches) and submitted < i + concurrency:
            holder, seeds = batches[submitted]
            in_flight[submitted] = submit(submitted, holder, seeds)
            submitted += 1
        return in_flight.pop(i)

    return take


B = TypeVar("B")


def remote_epoch(
    batches: Sequence[Batch],
    submit: Callable[[int, int, Tensor], T],
    receive: Callable[[int, T], B],
    *,
    concurrency: int,
    prefetch: int,
    device: torch.device,
    record: Callable[[B, torch.cuda.Stream], None],
) -> Prefetcher[B]:
    """An epoch of batches from the sampler servers: ``submit(index, holder, seeds)`` sends
    a batch's request (``concurrency`` in flight, in order), ``receive(index, request)``
    waits for its answer and unpacks it; a background thread keeps ``prefetch`` ahead."""
    take = requests_ahead(batches, concurrency, submit)
    return Prefetcher(
        lambda i: receive(i, take(i)),
        len(batches),
        depth=max(1, prefetch),
        device=device,
        record=record,
    )


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

        def submit(
            _index: int, holder: int, seeds: Tensor
        ) -> tuple[Future[Any], SlotReader | None, int]:
            reader = self.readers.get(holder)
            if reader is None or self.request_into is None:
                return self.request(holder, seeds), None, -1
            slot = reader.acquire()
            return self.request_into(holder, slot, seeds), reader, slot

        def receive(i: int, request: tuple[Future[Any], SlotReader | None, int]) -> MiniBatch:
            fut, reader, slot = request
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

        return remote_epoch(
            batches,
            submit,
            receive,
            concurrency=self.concurrency,
            prefetch=self.prefetch,
            device=self.device,
            record=MiniBatch.record_stream,
        )
