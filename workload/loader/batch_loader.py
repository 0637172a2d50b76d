"""Mini-batches of sampled subgraphs with features, prefetched in the background."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch
from torch import Tensor

from distgnn_workload.loader.features import FeatureSource
from distgnn_workload.loader.streams import LOADER_STREAMS
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.static_hops import StaticHops

T = TypeVar("T")


@dataclass
class MiniBatch:
    """One training step's input: the sampled subgraph, its node features and seed labels.

    ``static``, when a pipeline was asked for it, is the subgraph padded to fixed shapes
    (:func:`~distgnn_workload.sampling.pad_hops`) for a training step in a CUDA graph.
    """

    hop: HopBatch
    x: Tensor
    y: Tensor
    static: StaticHops | None = None

    @property
    def num_seeds(self) -> int:
        return self.hop.num_seeds

    @property
    def num_nodes(self) -> int:
        return self.hop.num_nodes

    def to(self, device: torch.device | str, non_blocking: bool = False) -> MiniBatch:
        return replace(
            self,
            hop=self.hop.to(device, non_blocking),
            x=self.x.to(device, non_blocking=non_blocking),
            y=self.y.to(device, non_blocking=non_blocking),
        )

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Mark every tensor as used by ``stream`` (see ``torch.Tensor.record_stream``)."""
        self.hop.record_stream(stream)
        self.x.record_stream(stream)
        self.y.record_stream(stream)
        if self.static is not None:
            self.static.record_stream(stream)


@dataclass
class HeteroMiniBatch:
    """One step's input: the sampled typed subgraph, featured types' inputs, seed labels."""

    hop: HeteroHopBatch
    x: dict[str, Tensor]
    y: Tensor
    owner_counts: dict[str, list[int]] | None = None
    """Per node type that the pipeline counts
    (:meth:`~distgnn_workload.runtime.batches.HeteroPipeline.count_owners`), how many of the
    batch's nodes each rank owns."""

    @property
    def num_seeds(self) -> int:
        """Seed rows of every type (a link batch seeds both ends and the negatives)."""
        return self.hop.num_seed_rows

    @property
    def num_nodes(self) -> int:
        return sum(self.hop.num_nodes.values())

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Mark every tensor as used by ``stream`` (made on the prefetcher's side stream)."""
        self.hop.record_stream(stream)
        for t in (*self.x.values(), self.y):
            t.record_stream(stream)


class Sampler(Protocol):
    """What the loader needs from a sampler."""

    def sample(self, seeds: Tensor) -> HopBatch: ...


class _End:
    pass


@dataclass
class _Failure:
    error: BaseException


class Prefetcher(Generic[T]):
    """Runs ``produce(i)`` for i in 0..n-1 ahead of the consumer, ``depth`` items ahead.

    With ``depth >= 1`` a background thread produces (on a side CUDA stream when ``device``
    is CUDA; the consumer's stream then waits on an event, so nothing blocks the host).
    ``depth = 0`` produces inline. ``wait_s`` holds, per item, how long the consumer waited.
    ``finish()``, when given, runs where ``produce`` runs, after the last item is handed over
    (also when there are none) and before the iteration ends. Breaking out of the iteration
    stops the thread.
    """

    def __init__(
        self,
        produce: Callable[[int], T],
        count: int,
        *,
        depth: int,
        device: torch.device,
        record: Callable[[T, torch.cuda.Stream], None] | None = None,
        finish: Callable[[], None] | None = None,
    ) -> None:
        if depth < 0:
            raise ValueError(f"prefetch depth must be >= 0, got {depth}")
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        self.produce = produce
        self.count = count
        self.depth = depth
        self.device = device
        self.record = record
        self.finish = finish
        self.wait_s: list[float] = []
        self._gpu_marks: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def gpu_wait_s(self) -> list[float]:
        """Per item, seconds the consumer's CUDA stream stalled waiting for it (synchronises).

        The host-side ``wait_s`` is not this: a GPU trainer's host runs ahead of its stream,
        so it may wait on the queue while the GPU is still busy with earlier steps.
        """
        out = []
        for before, after in self._gpu_marks:
            after.synchronize()
            out.append(before.elapsed_time(after) / 1e3)
        return out

    def __iter__(self) -> Iterator[T]:
        self.wait_s = []
        self._gpu_marks = []
        if self.depth == 0:
            for i in range(self.count):
                start = time.perf_counter()
                item = self.produce(i)
                self.wait_s.append(time.perf_counter() - start)
                yield item
            if self.finish is not None:
                self.finish()
            return
        yield from self._threaded()

    def _threaded(self) -> Iterator[T]:
        if self.device.type != "cuda":
            yield from self._run_thread(None)
            return
        # one stream for every epoch's and evaluation's thread, not a new one each time: the
        # allocator keeps a stream's freed blocks for that stream alone
        with LOADER_STREAMS.lease(self.device) as stream:
            yield from self._run_thread(stream)

    def _run_thread(self, stream: torch.cuda.Stream | None) -> Iterator[T]:
        cuda = stream is not None
        slots: queue.Queue[Any] = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def put(item: object) -> bool:
            while not stop.is_set():
                try:
                    slots.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def work() -> None:
            try:
                if cuda:
                    torch.cuda.set_device(self.device)
                for i in range(self.count):
                    if stop.is_set():
                        return
                    with torch.cuda.stream(stream) if stream is not None else nullcontext():
                        item = self.produce(i)
                        event = torch.cuda.Event() if cuda else None  # type: ignore[no-untyped-call]
                        if event is not None:
                            event.record(stream)
                    if not put((item, event)):
                        return
                if self.finish is not None:
                    with torch.cuda.stream(stream) if stream is not None else nullcontext():
                        self.finish()
                put(_End())
            except BaseException as error:
                put(_Failure(error))

        thread = threading.Thread(target=work, name="distgnn-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                start = time.perf_counter()
                got = slots.get()
                waited = time.perf_counter() - start
                if isinstance(got, _End):
                    return
                if isinstance(got, _Failure):
                    raise got.error
                item, event = got
                if event is not None:
                    current = torch.cuda.current_stream(self.device)
                    before = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    after = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                    before.record(current)
                    current.wait_event(event)
                    after.record(current)
                    self._gpu_marks.append((before, after))
                    if self.record is not None:
                        self.record(item, current)
                self.wait_s.append(waited)
                yield item
        finally:
            stop.set()
            while thread.is_alive():
                with suppress(queue.Empty):
                    slots.get(timeout=0.1)
            thread.join()


def _order(seeds: Tensor, shuffle: bool, seed: int, epoch: int) -> Tensor:
    if not shuffle:
        return seeds
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return seeds[torch.randperm(seeds.numel(), generator=g)]


class BatchLoader:
    """Iterates an epoch of ``MiniBatch``es: sampled subgraph, features, seed labels.

    ``seeds`` are global ids (e.g. this rank's training nodes); ``labels`` is a tensor
    indexed by global id or a function of the seed ids. Batches are sampled and gathered
    ``prefetch`` ahead in a background thread (a side CUDA stream on GPU); ``data_wait_s``
    holds, per batch of the current epoch, the seconds the consumer (host) waited for it,
    and ``gpu_data_wait_s()`` the seconds the training stream stalled for it.
    ``set_epoch`` picks the shuffle of the next epoch (otherwise each epoch advances it).
    """

    def __init__(
        self,
        seeds: Tensor | np.ndarray | Sequence[int],
        sampler: Sampler,
        features: FeatureSource,
        labels: Tensor | Callable[[Tensor], Tensor],
        batch_size: int,
        *,
        shuffle: bool,
        prefetch: int,
        device: torch.device | str,
        drop_last: bool = False,
        seed: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.seeds = torch.as_tensor(np.asarray(seeds) if not isinstance(seeds, Tensor) else seeds)
        self.seeds = self.seeds.to(torch.int64).reshape(-1).cpu()
        self.sampler = sampler
        self.features = features
        self.labels = labels
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.prefetch = prefetch
        self.device = torch.device(device)
        self.drop_last = drop_last
        self.seed = seed
        self.epoch = 0
        self.data_wait_s: list[float] = []
        self._prefetcher: Prefetcher[MiniBatch] | None = None

    def __len__(self) -> int:
        n = self.seeds.numel()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def gpu_data_wait_s(self) -> list[float]:
        """Per batch of the current epoch, seconds the training CUDA stream stalled for it.

        Empty on CPU and without prefetch; reading it synchronises with the GPU.
        """
        return self._prefetcher.gpu_wait_s() if self._prefetcher is not None else []

    def _labels_of(self, ids: Tensor) -> Tensor:
        if isinstance(self.labels, Tensor):
            return self.labels.index_select(0, ids.to(self.labels.device)).to(self.device)
        return self.labels(ids).to(self.device)

    def __iter__(self) -> Iterator[MiniBatch]:
        order = _order(self.seeds, self.shuffle, self.seed, self.epoch)
        self.epoch += 1
        bs = self.batch_size

        def produce(i: int) -> MiniBatch:
            ids = order[i * bs : (i + 1) * bs]
            hop = self.sampler.sample(ids).to(self.device, non_blocking=True)
            x = self.features.gather(hop.node_ids)
            return MiniBatch(hop=hop, x=x, y=self._labels_of(hop.seed_ids))

        prefetcher = Prefetcher(
            produce,
            len(self),
            depth=self.prefetch,
            device=self.device,
            record=MiniBatch.record_stream,
        )
        self._prefetcher = prefetcher
        batches = iter(prefetcher)
        try:
            for batch in batches:
                self.data_wait_s = prefetcher.wait_s
                yield batch
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # stops the background thread when the consumer breaks out early
