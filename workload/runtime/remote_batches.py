"""Server-client mode: a trainer's mini-batches come from the sampler servers over RPC.

An epoch keeps ``samplers.concurrency`` requests in flight (:func:`requests_ahead`), and the
loader's :class:`~distgnn_workload.loader.Prefetcher` keeps ``trainers.prefetch`` finished
batches ahead of the training step (:func:`remote_epoch`, one for every graph). A server's
failure is raised with the server's name and traceback. A homogeneous batch comes over RPC
or through a shared slot of a server on this host (:class:`RemotePipeline`); a typed batch
over RPC, on a random stream of its own derived from the job seed, the epoch (or the
evaluation's key), this rank and the batch's index (:class:`TypedRemotePipeline`), so that a
resumed run asks for what an uninterrupted one did, whichever sampler thread serves it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.loader import HeteroMiniBatch, MiniBatch, Prefetcher
from distgnn_workload.runtime.batches import HeteroBatches
from distgnn_workload.runtime.rpc import wait_remote
from distgnn_workload.runtime.seeds import Batch, batch_stream
from distgnn_workload.runtime.shared_slots import SlotReader
from distgnn_workload.runtime.wire import (
    TypedWireBatch,
    WireBatch,
    WireMeta,
    feature_bytes,
    unpack,
    unpack_from,
    unpack_typed,
)
from distgnn_workload.sampling import StaticLayout, pad_hops

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


class RemoteBatches:
    """What the remote pipelines share: their device, the batches kept finished ahead
    (``prefetch``) and the requests kept in flight (``concurrency``)."""

    def __init__(self, *, device: torch.device, prefetch: int, concurrency: int) -> None:
        self.device = device
        self.prefetch = prefetch
        self.concurrency = max(1, concurrency)

    def _remote_epoch(
        self,
        batches: Sequence[Batch],
        submit: Callable[[int, int, Tensor], T],
        receive: Callable[[int, T], B],
        record: Callable[[B, torch.cuda.Stream], None],
    ) -> Prefetcher[B]:
        """:func:`remote_epoch` with this pipeline's settings."""
        return remote_epoch(
            batches,
            submit,
            receive,
            concurrency=self.concurrency,
            prefetch=self.prefetch,
            device=self.device,
            record=record,
        )


class RemotePipeline(RemoteBatches):
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
        super().__init__(device=device, prefetch=prefetch, concurrency=concurrency)
        self.request = request
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

        return self._remote_epoch(batches, submit, receive, MiniBatch.record_stream)


TypedRequest = Callable[[int, Tensor, int], Future[TypedWireBatch]]
"""Ask sampler ``h`` for the typed batch of ``seeds`` on the random stream ``stream``."""


class TypedRemotePipeline(RemoteBatches, HeteroBatches):
    """Typed batches from the sampler servers (see the module docstring); a sampler's
    failure is raised with its name and traceback."""

    def __init__(
        self,
        request: TypedRequest,
        *,
        rank: int,
        seed: int,
        device: torch.device,
        prefetch: int,
        concurrency: int,
        on_batch: Callable[[TypedWireBatch], None] | None = None,
    ) -> None:
        super().__init__(device=device, prefetch=prefetch, concurrency=concurrency)
        self.request = request
        self.rank = rank
        self.seed = seed
        self.on_batch = on_batch
        self._lock = threading.Lock()
        self.received = 0
        """Batches received from the sampler servers so far."""
        self.bytes_received = 0
        """Bytes of featured rows received so far."""

    def _epoch(
        self, batches: Sequence[Batch], epoch: int | None, evaluation: int
    ) -> Prefetcher[HeteroMiniBatch]:
        def submit(index: int, holder: int, seeds: Tensor) -> Future[TypedWireBatch]:
            stream = batch_stream(self.seed, epoch, evaluation, self.rank, index)
            return self.request(holder, seeds.cpu(), stream)

        def receive(i: int, fut: Future[TypedWireBatch]) -> HeteroMiniBatch:
            value = wait_remote(fut, f"sampler-{batches[i][0]}")
            with self._lock:
                self.received += 1
                self.bytes_received += feature_bytes(value)
            if self.on_batch is not None:
                self.on_batch(value)
            hop, x, y = unpack_typed(value, self.device)
            return HeteroMiniBatch(hop=hop, x=x, y=y)

        return self._remote_epoch(batches, submit, receive, HeteroMiniBatch.record_stream)
