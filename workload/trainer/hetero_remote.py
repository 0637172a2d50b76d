"""A heterogeneous trainer's batches in server-client mode: typed batches from sampler servers.

Each batch of the epoch's plan (``(sampler, seeds)``, :mod:`distgnn_workload.runtime.seeds`)
is requested from that sampler with a random-stream seed of its own, derived from the job
seed, the epoch (or the evaluation's key), this rank and the batch's index: a resumed run
asks for what an uninterrupted one did, and the batch does not depend on which sampler
thread serves it. ``samplers.concurrency`` requests are kept in flight and a background
thread (:class:`~distgnn_workload.loader.Prefetcher`) keeps ``trainers.prefetch`` finished
batches ahead of the step. A sampler's failure is raised with its name and traceback.
The samplers this rank draws from are those of the homogeneous locality rules
(:func:`~distgnn_workload.runtime.seeds.local_ranks`): its GPU's, else its node's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_workload.loader import Prefetcher
from distgnn_workload.runtime.batch_targets import serve_typed_batch
from distgnn_workload.runtime.batches import (
    TypedWireBatch,
    feature_bytes,
    requests_ahead,
    unpack_typed,
)
from distgnn_workload.runtime.rpc import wait_remote
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.trainer.hetero_pipeline import HeteroMiniBatch, epoch_stream, stream_seed

log = logging.getLogger(__name__)

HeteroRequest = Callable[[int, Tensor, int], Future[TypedWireBatch]]
"""Ask sampler ``h`` for the typed batch of ``seeds`` on the random stream ``stream``."""


def batch_stream(seed: int, epoch: int | None, evaluation: int, rank: int, index: int) -> int:
    """The random stream of batch ``index`` of a rank's epoch (None: of an evaluation)."""
    return stream_seed(epoch_stream(seed, epoch, evaluation, rank), index, 0)


def rpc_request(holder: int, seeds: Tensor, stream: int) -> Future[TypedWireBatch]:
    fut: Future[TypedWireBatch] = rpc.rpc_async(
        f"sampler-{holder}", serve_typed_batch, args=(seeds, stream)
    )
    return fut


class HeteroRemotePipeline:
    """Typed batches from the sampler servers (see the module docstring)."""

    def __init__(
        self,
        request: HeteroRequest,
        *,
        rank: int,
        seed: int,
        device: torch.device,
        prefetch: int,
        concurrency: int,
        on_batch: Callable[[TypedWireBatch], None] | None = None,
    ) -> None:
        self.request = request
        self.rank = rank
        self.seed = seed
        self.device = device
        self.prefetch = prefetch
        self.concurrency = max(1, concurrency)
        self.on_batch = on_batch
        self._lock = threading.Lock()
        self.received = 0
        """Batches received from the sampler servers so far."""
        self.bytes_received = 0
        """Bytes of featured rows received so far."""

    def prepare(self, batch_size: int) -> None:
        """Nothing to capture here: the samplers sample."""

    def epoch(
        self,
        batches: Sequence[Batch],
        static: StaticLayout | None = None,
        *,
        epoch: int | None = None,
        evaluation: int = 0,
    ) -> Prefetcher[HeteroMiniBatch]:
        """The batches of training epoch ``epoch``, or (None) of evaluation ``evaluation``."""
        if static is not None:
            raise ValueError("typed batches have no fixed-shape layout")

        def submit(index: int, holder: int, seeds: Tensor) -> Future[TypedWireBatch]:
            stream = batch_stream(self.seed, epoch, evaluation, self.rank, index)
            return self.request(holder, seeds.cpu(), stream)

        take = requests_ahead(batches, self.concurrency, submit)

        def produce(i: int) -> HeteroMiniBatch:
            value = wait_remote(take(i), f"sampler-{batches[i][0]}")
            with self._lock:
                self.received += 1
                self.bytes_received += feature_bytes(value)
            if self.on_batch is not None:
                self.on_batch(value)
            hop, x, y = unpack_typed(value, self.device)
            return HeteroMiniBatch(hop=hop, x=x, y=y)

        return Prefetcher(
            produce,
            len(batches),
            depth=max(1, self.prefetch),
            device=self.device,
            record=HeteroMiniBatch.record_stream,
        )
