"""Worker mode: a trainer samples its own mini-batches and gathers their features.

An epoch's plan (:mod:`distgnn_workload.runtime.seeds`) runs through the loader's
:class:`~distgnn_workload.loader.Prefetcher`: a background thread on a side CUDA stream keeps
``trainers.prefetch`` finished mini-batches ahead of the training step, and the time the
step waits for one is the data wait. That thread also samples a few batches ahead of the
one it finishes (:class:`LocalPipeline`), so that the remote features of a batch are on
their way (one round of the trainers' feature exchange, only the ids missing from the
cache) while the next ones are sampled, and it ends each epoch or evaluation by serving its
peers until all are done (the exchange's phase). Server-client mode's pipelines are in
:mod:`~distgnn_workload.runtime.remote_batches`, the wire format in
:mod:`~distgnn_workload.runtime.wire`.

A typed job's batches (:class:`HeteroPipeline`) are target-type seeds sampled per edge type
at the resolved fanouts, with the features of every featured type gathered for the sampled
nodes: from the trainer's whole copy of them, or (``features``) from its own partition's
rows, its hot cache and, for the rest, their owners (over the feature exchange, a few
batches ahead as in worker mode). The rows of featureless types are
learnt: the training step looks them up (collectively) in their sharded embeddings. Its
sampler's random stream restarts for every epoch (from the job seed, the epoch and the
rank) and for every evaluation, so that a resumed run samples what an uninterrupted run
would have sampled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.loader import FeatureSource, HeteroMiniBatch, MiniBatch, Prefetcher
from distgnn_workload.pinned_copies import start_to_host
from distgnn_workload.runtime.features.pending import PendingGather
from distgnn_workload.runtime.seeds import Batch, epoch_stream, stream_seed
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.sampling import (
    HeteroNeighborSampler,
    HopBatch,
    NeighborSampler,
    StaticLayout,
    pad_hops,
)
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler
from distgnn_workload.sampling.static_sample import StaticCaps

log = logging.getLogger(__name__)

T = TypeVar("T")

FIT_STREAM = -2
"""The ``epoch`` of the random stream that fits a typed sampler's caps (no training epoch's)."""
LOOKAHEAD = 2
"""Batches a worker-mode pipeline samples (and sends feature requests for) ahead."""
PREFETCH_DEPTH = 2
"""Typed batches sampled ahead of the training step, on a background thread."""

OwnerCounter = Callable[[Tensor], Tensor]
"""Of a node type's type-local ids on the device, how many each rank owns (``[world]``, on
the device; e.g. :meth:`~distgnn_workload.embeddings.ShardedEmbedding.owner_counts`)."""
Started = tuple[
    HeteroHopBatch, dict[str, PendingGather], tuple[Tensor, torch.cuda.Event | None] | None
]
"""A typed batch sampled, its rows being gathered and its owner counts being copied out."""


class Ahead(Generic[T]):
    """Items ``make(j)`` of ``j`` in ``0..count-1``, made in order and kept until taken: a
    pipeline's batches started (or launched) some way ahead of the one it hands over."""

    def __init__(self, make: Callable[[int], T], count: int) -> None:
        self.make = make
        self.count = count
        self.made: dict[int, T] = {}
        self.next = 0

    def fill(self, last: int) -> None:
        """Make every item up to ``last`` not made yet."""
        while self.next < self.count and self.next <= last:
            self.made[self.next] = self.make(self.next)
            self.next += 1

    def take(self, i: int, ahead: int = 0) -> T:
        """Item ``i``, once every item up to ``i + ahead`` is made."""
        self.fill(i + ahead)
        return self.made.pop(i)


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
        return self._start(self.sampler.sample(seeds))

    def _start(self, hop: HopBatch) -> tuple[HopBatch, PendingGather, Tensor]:
        hop = hop.to(self.device, non_blocking=True)
        pending = start_gather(self.features, hop.node_ids)
        y = self.labels[hop.seed_ids.to(self.labels.device)].to(self.device, non_blocking=True)
        return hop, pending, y

    def _launch(self, seeds: Tensor) -> Any:
        """Queue the sampling of ``seeds`` where the sampler can (else: sample them)."""
        launch = getattr(self.sampler, "launch", None)
        return launch(seeds) if launch is not None else self.sampler.sample(seeds)

    def _finish(self, launched: Any) -> HopBatch:
        finish = getattr(self.sampler, "finish", None)
        return finish(launched) if finish is not None else launched  # type: ignore[no-any-return]

    def produce(self, seeds: Tensor) -> MiniBatch:
        hop, pending, y = self.start(seeds)
        return MiniBatch(hop=hop, x=pending.wait(), y=y)

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[MiniBatch]:
        """The epoch's mini-batches; with ``static``, each also padded to that layout.

        Three batches at a time are on their way: batch i + lookahead + 1 is launched
        (its sampling queued on the GPU), batch i + lookahead's features are started (its
        sizes read back by then, without waiting) and batch i's rows merged.
        """
        launched = Ahead(lambda j: self._launch(batches[j][1]), len(batches))
        started = Ahead(lambda j: self._start(self._finish(launched.take(j))), len(batches))

        def produce(i: int) -> MiniBatch:
            launched.fill(i + self.lookahead + 1)
            hop, pending, y = started.take(i, self.lookahead)
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


class TypedFeatures(Protocol):
    """Where a worker-mode trainer's featured rows come from
    (:class:`~distgnn_workload.runtime.features.remote.TypedFeatureSource`)."""

    def start(self, node_type: str, ids: Tensor) -> PendingGather:
        """The rows of ``ids`` at hand now, the remote ones on the gather's ``wait()``."""
        ...

    def finish_phase(self) -> None:
        """After a phase's last batch: serve the peers until every rank is done."""
        ...

    @property
    def exchanged(self) -> bool:
        """Whether some type's rows come over the feature exchange (its rounds meet the
        peers')."""
        ...


class HeteroBatches:
    """Where a heterogeneous trainer's batches come from: sampled here (worker mode,
    :class:`HeteroPipeline`) or by sampler servers (server-client mode,
    :class:`~distgnn_workload.runtime.remote_batches.TypedRemotePipeline`)."""

    def prepare(self, batch_size: int) -> None:
        """Get ready for batches of up to ``batch_size`` seeds (nothing by default)."""

    def epoch(
        self,
        batches: Sequence[Batch],
        static: StaticLayout | None = None,
        *,
        epoch: int | None = None,
        evaluation: int = 0,
    ) -> Prefetcher[HeteroMiniBatch]:
        """The batches of training epoch ``epoch``, or (None) of the evaluation numbered
        ``evaluation`` (any number that the same evaluation gets again after a resume).

        ``static`` must be None: typed batches have no fixed-shape layout (yet).
        """
        if static is not None:
            raise ValueError("typed batches have no fixed-shape layout")
        return self._epoch(batches, epoch, evaluation)

    def _epoch(
        self, batches: Sequence[Batch], epoch: int | None, evaluation: int
    ) -> Prefetcher[HeteroMiniBatch]:
        raise NotImplementedError


class HeteroPipeline(HeteroBatches):
    """Samples and gathers a rank's batches, :data:`PREFETCH_DEPTH` ahead of the step."""

    def __init__(
        self,
        data: HeteroTrainingData,
        fanouts: Mapping[EdgeType, Sequence[int]],
        *,
        rank: int,
        seed: int,
        device: torch.device,
        input_dtype: torch.dtype = torch.float32,
        depth: int = PREFETCH_DEPTH,
        lookahead: int = LOOKAHEAD,
        features: TypedFeatures | None = None,
        sampler: HeteroNeighborSampler | None = None,
        static_sampler: bool | None = None,
    ) -> None:
        """``sampler``: what samples each batch (None: around target-type seeds, with their
        labels; a given sampler's batches carry none). ``static_sampler``: the sampler's
        static execution (None: on CUDA). ``lookahead``: batches sampled, and their rounds
        of the feature exchange started, ahead of the one being finished (only where
        ``features`` come over the exchange)."""
        self.labelled = sampler is None
        self.data = data
        self.rank = rank
        self.seed = seed
        self.device = device
        self.depth = depth
        self.lookahead = max(0, lookahead)
        self.sampler = sampler or HeteroNeighborSampler(
            {et: data.in_csr[et] for et in data.edge_types},
            data.node_counts,
            {et: list(fanouts[et]) for et in data.edge_types},
            seed_type=data.target_node_type,
            device=device,
            seed=stream_seed(seed, 0, rank),
            static_shapes=static_sampler,
        )
        self.input_dtype = input_dtype
        self.features = features
        self.x = (
            {t: v.to(device=device, dtype=input_dtype) for t, v in data.x.items()}
            if features is None
            else {}
        )
        self.y = data.y.to(device)
        self.owner_counters: dict[str, OwnerCounter] = {}

    def prepare(self, batch_size: int) -> None:
        """Capture the sampler's CUDA graph now (a no-op on CPU)."""
        self.sampler.prepare(batch_size)

    def count_owners(self, counters: Mapping[str, OwnerCounter]) -> None:
        """Count each batch's nodes of every type in ``counters`` per owning rank, on this
        thread, after the batch is sampled: the batches carry the counts on the host
        (``owner_counts``), so that a step can check them against its blocks (the copy is
        waited for when the batch is finished, by then long done)."""
        self.owner_counters = dict(counters)

    def owner_peaks(self, seed_batches: Sequence[Tensor]) -> dict[str, int]:
        """The most nodes of each counted type that one rank owns in one batch of
        ``seed_batches``, sampled from the fitting stream (as :meth:`fit`'s)."""
        self.sampler.reseed(stream_seed(self.seed, FIT_STREAM, self.rank))
        peaks = dict.fromkeys(self.owner_counters, 0)
        for seeds in seed_batches:
            hop = self.sampler.sample(seeds)
            for t, counter in self.owner_counters.items():
                peaks[t] = max(peaks[t], int(counter(hop.node_ids[t]).max()))
        return peaks

    def fit(self, seed_batches: Sequence[Tensor]) -> StaticCaps | None:
        """Fit the sampler's static buffers to batches like ``seed_batches`` (full ones of
        this rank's; :meth:`HeteroNeighborSampler.fit`), from a stream of their own: the
        caps are the same after a resume. Returns the caps (None: no static execution)."""
        self.sampler.reseed(stream_seed(self.seed, FIT_STREAM, self.rank))
        caps = self.sampler.fit(seed_batches)
        if caps is not None:
            bounds = sum(self.sampler.bounds(max(len(s) for s in seed_batches)).flat())
            log.info(
                "typed sampler fitted to %d batches: %d slots for nodes and edges, against "
                "%d at the bounds",
                len(seed_batches),
                sum(caps.flat()),
                bounds,
            )
        return caps

    def _epoch(
        self, batches: Sequence[Batch], epoch: int | None, evaluation: int
    ) -> Prefetcher[HeteroMiniBatch]:
        self.sampler.reseed(epoch_stream(self.seed, epoch, evaluation, self.rank))
        exchanged = self.features is not None and self.features.exchanged
        lookahead = self.lookahead if exchanged else 0
        started = Ahead(lambda j: self._start(batches[j][1]), len(batches))

        def produce(i: int) -> HeteroMiniBatch:
            # batch i + lookahead sampled and its rounds started before batch i's rows are
            # waited for: the rounds meet the peers' while this thread samples on
            return self._finish(*started.take(i, lookahead))

        return Prefetcher(
            produce,
            len(batches),
            depth=self.depth,
            device=self.device,
            record=HeteroMiniBatch.record_stream,
            # a feature exchange's phase ends with this rank serving its peers until all are done
            finish=None if self.features is None else self.features.finish_phase,
        )

    @property
    def moved_bytes(self) -> int:
        """Bytes of remote features this rank pulled since the start, all types (0: none are
        remote)."""
        return int(getattr(self.features, "moved_bytes", 0))

    def batch(self, seeds: Tensor) -> HeteroMiniBatch:
        """The batch of ``seeds``: sampled, its rows gathered."""
        return self._finish(*self._start(seeds))

    def _start(self, seeds: Tensor) -> Started:
        """Sample ``seeds``, start counting the counted types' nodes per owner and gathering
        every featured type's rows (the remote ones of every type on their way before any
        is waited for)."""
        hop = self.sampler.sample(seeds)  # host seeds: checked there, copied through pinned memory
        owners = None
        if self.owner_counters:
            counts = [f(hop.node_ids[t]) for t, f in self.owner_counters.items()]
            owners = start_to_host(torch.stack(counts))
        if self.features is None:
            gathers = {t: PendingGather(feats[hop.node_ids[t]]) for t, feats in self.x.items()}
        else:
            gathers = {t: self.features.start(t, hop.node_ids[t]) for t in self.data.x}
        return hop, gathers, owners

    def _finish(
        self,
        hop: HeteroHopBatch,
        pending: dict[str, PendingGather],
        owners: tuple[Tensor, torch.cuda.Event | None] | None = None,
    ) -> HeteroMiniBatch:
        x = {t: g.wait().to(self.device, self.input_dtype) for t, g in pending.items()}
        batch = HeteroMiniBatch(hop=hop, x=x, y=self.labels(hop))
        if owners is not None:
            counts, ready = owners
            if ready is not None:
                ready.synchronize()
            batch.owner_counts = dict(zip(self.owner_counters, counts.tolist(), strict=True))
        return batch

    def labels(self, hop: HeteroHopBatch) -> Tensor:
        """The seeds' labels; none from a given sampler (a link job's: its seeds are ends
        of edges)."""
        return self.y[hop.seed_ids] if self.labelled else self.y[:0]
