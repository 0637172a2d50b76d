"""The one-type case of the neighbour sampler: one CSR, one fanout list, a :class:`HopBatch`.

:class:`NeighborSampler` runs the typed sampler's executions (:mod:`dynamic_sample`,
:mod:`static_sample`) over its graph as a one-type :class:`TypedCSR`, with the same CUDA
graph capture (:mod:`graph_capture`); :meth:`NeighborSampler.launch` and
:meth:`NeighborSampler.finish` queue a batch and cut it later, so that a loader a batch
ahead never waits for the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.pinned_copies import start_to_host, to_device, to_host
from distgnn_workload.sampling import edge_exclusion, relabel
from distgnn_workload.sampling.csr import (
    TypedCSR,
    one_type_fanouts,
)
from distgnn_workload.sampling.dynamic_sample import SampledHop, sample_dynamic
from distgnn_workload.sampling.graph_capture import CapturedSampler
from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.hop_layout import Consts
from distgnn_workload.sampling.static_sample import StaticOut, sample_static
from distgnn_workload.sampling.uniform_subset import sample_neighbours

__all__ = ["LaunchedBatch", "NeighborSampler"]

Key = tuple[int, bool]
"""A one-type sampler's captured run: the batch capacity, and whether its batches exclude
edges."""


@dataclass
class LaunchedBatch:
    """A batch whose sampling is queued (:meth:`NeighborSampler.launch`)."""

    out: StaticOut
    """The padded outputs, the batch's own (not the captured buffers)."""
    sizes: Tensor
    """Its hop sizes on the host, there once ``ready`` has happened."""
    ready: torch.cuda.Event | None
    num_seeds: int


class NeighborSampler(CapturedSampler[Key, StaticOut]):
    """The one-type case: per hop, ``fanout`` neighbours of every frontier node.

    ``indices[indptr[v]:indptr[v + 1]]`` are the nodes whose messages flow into ``v`` (for
    PyG's ``edge_index``, the CSC of the graph). A node of degree > fanout gets a uniformly
    random subset of ``fanout`` distinct neighbour positions; -1 takes all. New nodes of a
    hop are numbered in order of first appearance, through a global -> local id table on
    the device (no sort), so an instance is not safe for concurrent ``sample`` calls.

    The executions and their capture are the typed sampler's (above); :meth:`prepare`
    captures a batch size's graph ahead of time (before a server takes requests from
    several threads). ``sample(seeds, exclude)`` leaves out the edges whose keys
    (:mod:`~distgnn_workload.sampling.edge_exclusion`) are in ``exclude``: a link
    prediction batch's supervision edges.
    """

    def __init__(
        self,
        indptr: Tensor | np.ndarray,
        indices: Tensor | np.ndarray,
        fanouts: Sequence[int],
        *,
        device: torch.device | str | None = None,
        seed: int = 0,
        static_shapes: bool | None = None,
        cuda_graph: bool = True,
    ) -> None:
        # the static execution is the typed one's, over this graph as its one-type case
        self._typed = TypedCSR.one_type(indptr, indices, device)
        fanouts = one_type_fanouts(fanouts)
        self.device = torch.device(device) if device is not None else self._typed.device
        self.num_nodes = self._typed.num_nodes[NODE_TYPE]
        self.fanouts = fanouts
        self._indptr_ext = self._typed.indptr[EDGE_TYPE]
        self.indices = self._typed.indices[EDGE_TYPE]
        self.indptr = self._indptr_ext[:-1]
        # global id -> local id of the batch being sampled; -1 = not in the batch
        self._local = torch.full(
            (self.num_nodes + 1,), -1, dtype=relabel.table_dtype(self.device), device=self.device
        )
        self._consts: Consts = {}  # the static hops' index tensors, kept with the graphs
        self._start_stream(seed)
        self._pick_execution(static_shapes, cuda_graph, bounded=all(k > 0 for k in fanouts))
        self._capacity = 0

    def prepare(self, batch_size: int, *, excluding: bool = False) -> None:
        """Get ready for batches of up to ``batch_size`` seeds: on CUDA, capture their graph now.

        Later batches of at most this size replay it; a failed capture falls back as
        :meth:`sample` would. A no-op for the dynamic execution. ``excluding``: the graph
        of batches that exclude edges.
        """
        if not (self.static_shapes and batch_size > 0):
            return
        self._capacity = capacity = max(self._capacity, batch_size)
        if not self.cuda_graph or (capacity, excluding) in self._graphs:
            return
        padded = torch.full((capacity,), self.num_nodes, dtype=torch.int64, device=self.device)
        none = torch.empty(0, dtype=torch.int64, device=self.device)
        try:
            keys = edge_exclusion.padded(none, capacity) if excluding else None
            self._replay((capacity, excluding), padded, 0, keys)
        except RuntimeError as error:
            self._give_up_graphs(error, "the sampler")

    def sample(self, seeds: Tensor, exclude: Tensor | None = None) -> HopBatch:
        """Sample the hop-wise subgraph around ``seeds`` (global ids; each occurrence is a row),
        without the edges whose sorted keys are in ``exclude`` (at most one per seed)."""
        seeds = seeds.reshape(-1).to(torch.int64)
        num_seeds = seeds.numel()
        self._check_seeds(seeds)
        if exclude is not None:
            exclude = exclude.to(self.device, torch.int64)
        if self.static_shapes and num_seeds:
            return self._sample_padded(seeds, exclude)
        seeds = seeds.to(self.device)
        try:
            out = sample_dynamic(
                self._typed,
                {NODE_TYPE: self._local},
                {EDGE_TYPE: self.fanouts},
                self._sample_edge_type,
                {NODE_TYPE: seeds},
                NODE_TYPE,
                exclude=None if exclude is None else {EDGE_TYPE: exclude},
            )
        except BaseException:
            self._local.fill_(-1)
            raise
        return out.one_type()

    def launch(self, seeds: Tensor) -> HopBatch | LaunchedBatch:
        """Queue the sampling of ``seeds`` (as :meth:`sample`) without waiting for it.

        The static execution's outputs are copied out of the captured buffers (the next
        replay refills them) and its sizes sent to the host behind an event; :meth:`finish`
        cuts the batch once they are there. A loader that launches a batch ahead of the one
        it finishes never waits for the GPU. Other executions sample at once: the batch.
        """
        seeds = seeds.reshape(-1).to(torch.int64)
        if not (self.static_shapes and seeds.numel()):
            return self.sample(seeds)
        self._check_seeds(seeds)
        out = self._run_padded(seeds, None)
        if isinstance(out, HopBatch):
            return out
        if self.cuda_graph:
            out = out.copied()
        sizes, ready = start_to_host(out.counts)
        return LaunchedBatch(out, sizes, ready, seeds.numel())

    def finish(self, launched: HopBatch | LaunchedBatch) -> HopBatch:
        """The batch of a :meth:`launch`: its sizes awaited (done by then, most often)."""
        if isinstance(launched, HopBatch):
            return launched
        if launched.ready is not None:
            launched.ready.synchronize()
        return launched.out.one_type_batch(
            launched.sizes.tolist(), launched.num_seeds, len(self.fanouts)
        )

    def _check_seeds(self, seeds: Tensor) -> None:
        # checked where the seeds are: host seeds cost the GPU no sync
        if seeds.numel() and bool(((seeds < 0) | (seeds >= self.num_nodes)).any()):
            raise ValueError(f"seeds must be node ids in [0, {self.num_nodes})")

    def _sample_padded(self, seeds: Tensor, exclude: Tensor | None) -> HopBatch:
        """The static-shape execution: pad the seeds, run (or replay) it, cut to the sizes."""
        out = self._run_padded(seeds, exclude)
        if isinstance(out, HopBatch):
            return out
        sizes = to_host(out.counts).tolist()  # the one host sync, through pinned memory
        return out.one_type_batch(sizes, seeds.numel(), len(self.fanouts))

    def _run_padded(self, seeds: Tensor, exclude: Tensor | None) -> StaticOut | HopBatch:
        """Pad the seeds and queue the static run (or its replay): its outputs, or the
        batch sampled otherwise after a failed capture."""
        num_seeds = seeds.numel()
        # pad to the largest batch so far: a short last batch reuses the captured graph
        self._capacity = capacity = max(self._capacity, num_seeds)
        padded = torch.full((capacity,), self.num_nodes, dtype=torch.int64, device=seeds.device)
        padded[:num_seeds] = seeds
        # host seeds through pinned memory: a pageable copy stalls the other threads' CUDA
        # calls (the training step's) for as long as it waits
        padded = to_device(padded, self.device)
        if self.cuda_graph:
            keys = None if exclude is None else edge_exclusion.padded(exclude, capacity)
            try:
                return self._replay((capacity, keys is not None), padded, num_seeds, keys)
            except RuntimeError as error:
                self._give_up_graphs(error, "the sampler")
                return self.sample(seeds, exclude)
        count = torch.tensor(num_seeds, dtype=torch.int64, device=self.device)
        return self._sample_static(padded, count, exclude)

    def _reset_tables(self) -> None:
        self._local.fill_(-1)

    def _run_static(
        self, key: Key, seeds: Tensor, num_seeds: Tensor, extra: Tensor | None
    ) -> StaticOut:
        return self._sample_static(seeds, num_seeds, extra)

    def _sample_static(
        self, seeds: Tensor, num_seeds: Tensor, exclude: Tensor | None = None
    ) -> StaticOut:
        """Every hop padded to its bound; compaction by scatter; no host sync: the typed
        static execution (:func:`~distgnn_workload.sampling.static_sample.sample_static`)
        over the one node type and edge type.

        ``seeds`` is padded with the degree-0 node ``num_nodes``; ``num_seeds`` is a 0-d tensor.
        """
        return sample_static(
            self._typed,
            {NODE_TYPE: self._local},
            {EDGE_TYPE: self.fanouts},
            self.generator,
            NODE_TYPE,
            seeds,
            num_seeds,
            exclude=None if exclude is None else {EDGE_TYPE: exclude},
            consts=self._consts,
        )

    def _sample_hop(self, frontier: Tensor, fanout: int) -> tuple[Tensor, Tensor, Tensor]:
        """Return (frontier row of each edge, neighbour global id, edges per frontier row).

        One hop of the dynamic execution, rows in frontier order. Subclasses that sample
        some hops elsewhere (e.g. over RPC from the partition that owns the nodes) override
        this and pass ``static_shapes=False``; relabelling and the hop layout stay here.
        """
        rows, neighbours, counts, _ = sample_neighbours(
            self.indptr, self.indices, frontier, fanout, self.generator
        )
        return rows, neighbours, counts

    def _sample_edge_type(self, edge_type: EdgeType, frontier: Tensor, fanout: int) -> SampledHop:
        """:meth:`_sample_hop` as the dynamic execution's hop of the one edge type."""
        rows, neighbours, counts = self._sample_hop(frontier, fanout)
        return SampledHop(rows, neighbours, counts, None)
