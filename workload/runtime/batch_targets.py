"""The RPC targets of the sampler servers' mini-batches: what a trainer calls, what a sampler
serves.

A trainer asks ``sampler-<h>`` for a batch with ``rpc_async(name, serve_batch, ...)``; the
function runs on that sampler's RPC thread and hands the request to the server that the
sampler registered under :data:`SAMPLER_SERVER` (or :data:`TYPED_SAMPLER_SERVER`). Both
sides import the functions from here, below the trainer and the sampler roles, so that
neither role imports the other. Each returns at once with a future that a sampling thread
completes (``rpc.functions.async_execution``).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.rpc_targets import Target
from distgnn_workload.runtime.wire import TypedWireBatch, WireBatch, WireMeta


class BatchServer(Protocol):
    """A sampler server of a homogeneous job (:class:`~distgnn_workload.sampler.server.SamplerServer`)."""

    @property
    def device(self) -> torch.device: ...

    def submit(self, seeds: Tensor, into: tuple[str, int] | None = None) -> Future[Any]: ...


class TypedBatchServer(Protocol):
    """A sampler server of a typed job
    (:class:`~distgnn_workload.sampler.server.HeteroSamplerServer`)."""

    @property
    def device(self) -> torch.device: ...

    def submit(self, seeds: Tensor, stream_seed: int) -> Future[TypedWireBatch]: ...


SAMPLER_SERVER = Target[BatchServer]("sampler server")
TYPED_SAMPLER_SERVER = Target[TypedBatchServer]("typed sampler server")


def _on_device(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.set_device(device)  # not GPU 0, where a new RPC thread starts


@rpc.functions.async_execution  # type: ignore[untyped-decorator]
def serve_batch_into(consumer: str, slot: int, seeds: Tensor) -> Future[WireMeta]:
    """RPC target: write the mini-batch of ``seeds`` into ``consumer``'s shared slot."""
    server = rpc_targets.get(SAMPLER_SERVER)
    _on_device(server.device)
    fut: Future[WireMeta] = server.submit(seeds, into=(consumer, slot))
    return fut


@rpc.functions.async_execution  # type: ignore[untyped-decorator]
def serve_batch(seeds: Tensor) -> Future[WireBatch]:
    """RPC target: the mini-batch of ``seeds`` (a future completed by a sampling thread)."""
    server = rpc_targets.get(SAMPLER_SERVER)
    _on_device(server.device)
    fut: Future[WireBatch] = server.submit(seeds)
    return fut


@rpc.functions.async_execution  # type: ignore[untyped-decorator]
def serve_typed_batch(seeds: Tensor, stream_seed: int) -> Future[TypedWireBatch]:
    """RPC target: the typed mini-batch of ``seeds`` on the random stream ``stream_seed``."""
    server = rpc_targets.get(TYPED_SAMPLER_SERVER)
    _on_device(server.device)
    return server.submit(seeds, stream_seed)
