"""A trainer's heterogeneous mini-batches: typed sampling and the features of the sampled nodes.

Each batch of target-type seeds is sampled with :class:`HeteroNeighborSampler` at the
resolved per-edge-type fanouts; the features of every featured type are gathered for the
sampled nodes: from the trainer's whole copy of them, or (``features``, a
:class:`~distgnn_workload.runtime.features.remote.TypedFeatureSource`) from its own
partition's rows, its hot cache and, for the rest, their owners. The rows of featureless
types are not gathered here: they are learnt, and the training step looks them up
(collectively) in their sharded embeddings.

The sampler's random stream is restarted for every epoch (from the job seed, the epoch and
the rank) and for every evaluation, so that a run resumed from a checkpoint samples what an
uninterrupted run would have sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.loader import Prefetcher
from distgnn_workload.runtime.hetero_data import HeteroTrainingData
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.hop_batch import HeteroHopBatch

PREFETCH_DEPTH = 2
"""Batches sampled ahead of the training step, on a background thread."""
EVAL_STREAM = 1_000_000_007
"""Offset of the evaluation's random streams from the training epochs'."""


@dataclass
class HeteroMiniBatch:
    """One step's input: the sampled typed subgraph, featured types' inputs, seed labels."""

    hop: HeteroHopBatch
    x: dict[str, Tensor]
    y: Tensor

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


class TypedFeatures(Protocol):
    """Where a worker-mode trainer's featured rows come from."""

    def gather(self, node_type: str, ids: Tensor) -> Tensor: ...


class HeteroBatches(Protocol):
    """Where a heterogeneous trainer's batches come from: sampled here (worker mode,
    :class:`HeteroPipeline`) or by sampler servers (server-client mode,
    :class:`~distgnn_workload.trainer.pipelines.TypedRemotePipeline`)."""

    def prepare(self, batch_size: int) -> None: ...

    def epoch(
        self,
        batches: Sequence[Batch],
        static: StaticLayout | None = None,
        *,
        epoch: int | None = None,
        evaluation: int = 0,
    ) -> Prefetcher[HeteroMiniBatch]: ...


def stream_seed(seed: int, epoch: int, rank: int) -> int:
    """The sampler's seed for one rank's epoch (``epoch`` < 0: evaluations)."""
    return (seed * 1_000_003 + epoch * 7_919 + rank * 104_729) % (2**63 - 1)


def epoch_stream(seed: int, epoch: int | None, evaluation: int, rank: int) -> int:
    """The random stream of a rank's training epoch ``epoch``, or (None) of its evaluation
    numbered ``evaluation``."""
    if epoch is None:
        return stream_seed(seed + EVAL_STREAM, evaluation, rank)
    return stream_seed(seed, epoch, rank)


class HeteroPipeline:
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
        features: TypedFeatures | None = None,
        sampler: HeteroNeighborSampler | None = None,
    ) -> None:
        """``sampler``: what samples each batch (None: around target-type seeds, with their
        labels; a given sampler's batches carry none)."""
        self.labelled = sampler is None
        self.data = data
        self.rank = rank
        self.seed = seed
        self.device = device
        self.depth = depth
        self.sampler = sampler or HeteroNeighborSampler(
            {et: data.in_csr[et] for et in data.edge_types},
            data.node_counts,
            {et: list(fanouts[et]) for et in data.edge_types},
            seed_type=data.target_node_type,
            device=device,
            seed=stream_seed(seed, 0, rank),
        )
        self.input_dtype = input_dtype
        self.features = features
        self.x = (
            {t: v.to(device=device, dtype=input_dtype) for t, v in data.x.items()}
            if features is None
            else {}
        )
        self.y = data.y.to(device)

    def prepare(self, batch_size: int) -> None:
        """Capture the sampler's CUDA graph now (a no-op on CPU)."""
        self.sampler.prepare(batch_size)

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
        self.sampler.reseed(epoch_stream(self.seed, epoch, evaluation, self.rank))

        def produce(i: int) -> HeteroMiniBatch:
            return self.batch(batches[i][1])

        return Prefetcher(
            produce,
            len(batches),
            depth=self.depth,
            device=self.device,
            record=HeteroMiniBatch.record_stream,
        )

    def batch(self, seeds: Tensor) -> HeteroMiniBatch:
        hop = self.sampler.sample(seeds)  # host seeds: checked there, copied through pinned memory
        if self.features is None:
            x = {t: feats[hop.node_ids[t]] for t, feats in self.x.items()}
        else:
            x = {
                t: self.features.gather(t, hop.node_ids[t]).to(self.device, self.input_dtype)
                for t in self.data.x
            }
        return HeteroMiniBatch(hop=hop, x=x, y=self.labels(hop))

    def labels(self, hop: HeteroHopBatch) -> Tensor:
        """The seeds' labels; none from a given sampler (a link job's: its seeds are ends
        of edges)."""
        return self.y[hop.seed_ids] if self.labelled else self.y[:0]
