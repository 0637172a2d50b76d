"""Vectorised uniform neighbour sampling over a CSR graph, on CPU or GPU with the same code."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.sampling import edge_exclusion, relabel
from distgnn_workload.sampling.csr import INT32_MAX, TypedCSR, as_tensor, csc_from_edge_index
from distgnn_workload.sampling.dynamic_sample import SampledHop, sample_dynamic
from distgnn_workload.sampling.graph_capture import CUDA_GRAPH_LOCK, CapturedRun, CapturedSampler
from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.random_stream import reset_default_generator
from distgnn_workload.sampling.static_sample import StaticOut, sample_static
from distgnn_workload.sampling.uniform_subset import sample_neighbours

__all__ = ["CUDA_GRAPH_LOCK", "NeighborSampler", "csc_from_edge_index", "reset_default_generator"]


Key = tuple[int, bool]
"""A captured run's key: the batch capacity, and whether its batches exclude edges."""


class NeighborSampler(CapturedSampler[Key, StaticOut]):
    """Samples L-hop neighbourhoods: per hop, ``fanout`` neighbours of every frontier node.

    A node of degree > fanout gets a uniformly random subset of ``fanout`` distinct neighbour
    positions (without replacement); a node of degree <= fanout gets all of its neighbours.
    A fanout of -1 takes all neighbours. ``indices[indptr[v]:indptr[v + 1]]`` are the nodes
    whose messages flow into ``v`` (for PyG's ``edge_index``, that is the CSC of the graph).

    Relabelling uses a preallocated global-id -> local-id table on the sampler's device, so
    no sort is needed; an instance is therefore not safe for concurrent ``sample`` calls
    (use one per thread, or a pool that hands each instance to one thread at a time). New
    nodes of a hop are numbered in order of first appearance.

    Two executions of the same algorithm: the *dynamic* one sizes every tensor exactly (two
    host syncs per hop); the *static* one pads every hop to its bound (batch capacity times
    the product of the fanouts so far) and compacts by scatter, so it has no host sync until
    the final sizes are read. On CUDA the static one is captured once per batch capacity in
    a CUDA graph and replayed, which removes the per-kernel launch cost (hundreds of small
    kernels per batch). ``static_shapes=None`` picks static on CUDA, dynamic on CPU.
    Graphs are captured one at a time per process; :meth:`prepare` captures the graph of a
    batch size ahead of time (before a server takes requests from several threads).

    ``sample(seeds, exclude)`` leaves out of the subgraph the edges whose keys
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
        indptr_t = as_tensor(indptr, "indptr")
        indices_t = as_tensor(indices, "indices")
        if indptr_t.dim() != 1 or indptr_t.numel() < 1:
            raise ValueError("indptr must be a 1-D array of length num_nodes + 1")
        if indices_t.dim() != 1:
            raise ValueError("indices must be a 1-D array of neighbour ids")
        if indptr_t.dtype not in (torch.int32, torch.int64) or indices_t.dtype not in (
            torch.int32,
            torch.int64,
        ):
            raise TypeError(
                f"indptr/indices must be int32 or int64, got {indptr_t.dtype}/{indices_t.dtype}"
            )
        fanouts = [int(k) for k in fanouts]
        if not fanouts or any(k == 0 or k < -1 for k in fanouts):
            raise ValueError(
                f"fanouts must be a non-empty list of ints >= 1 (or -1 for all), got {fanouts}"
            )
        self.device = torch.device(device) if device is not None else indptr_t.device
        self.num_nodes = indptr_t.numel() - 1
        self.fanouts = fanouts

        indptr_t = indptr_t.to(self.device, torch.int64)
        if int(indptr_t[0]) != 0 or int(indptr_t[-1]) != indices_t.numel():
            raise ValueError(
                f"indptr must start at 0 and end at len(indices)={indices_t.numel()}, "
                f"got {int(indptr_t[0])}..{int(indptr_t[-1])}"
            )
        if bool((indptr_t[1:] < indptr_t[:-1]).any()):
            raise ValueError("indptr must be non-decreasing")
        index_dtype = torch.int32 if self.num_nodes <= INT32_MAX else torch.int64
        # one extra node id, num_nodes, of degree 0: the padding of static-shape batches
        self._indptr_ext = torch.cat([indptr_t, indptr_t[-1:]])
        self.indptr = self._indptr_ext[:-1]
        self.indices = indices_t.to(self.device, index_dtype)
        # the static execution is the typed one's, over this graph as its one-type case
        self._typed = TypedCSR(
            {NODE_TYPE: self.num_nodes},
            [EDGE_TYPE],
            {EDGE_TYPE: self._indptr_ext},
            {EDGE_TYPE: self.indices},
        )
        # global id -> local id of the batch being sampled; -1 = not in the batch
        self._local = torch.full(
            (self.num_nodes + 1,), -1, dtype=relabel.table_dtype(self.device), device=self.device
        )
        self._start_stream(seed)
        if static_shapes is None:
            static_shapes = self.device.type == "cuda" and all(k > 0 for k in fanouts)
        if static_shapes and any(k < 0 for k in fanouts):
            raise ValueError("static_shapes needs a bounded fanout: -1 (all neighbours) has none")
        self.static_shapes = static_shapes
        self.cuda_graph = cuda_graph and static_shapes and self.device.type == "cuda"
        self._graphs: dict[Key, CapturedRun[StaticOut]] = {}
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
        # checked where the seeds are: host seeds cost the GPU no sync
        if num_seeds and bool(((seeds < 0) | (seeds >= self.num_nodes)).any()):
            raise ValueError(f"seeds must be node ids in [0, {self.num_nodes})")
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
        return HopBatch(
            node_ids=out.node_ids[NODE_TYPE],
            num_seeds=num_seeds,
            num_nodes_per_hop=out.num_nodes_per_hop[NODE_TYPE],
            num_edges_per_hop=out.num_edges_per_hop[EDGE_TYPE],
            edge_index=out.edge_index[EDGE_TYPE],
            target_ptr=out.target_ptr[EDGE_TYPE],
        )

    def _sample_padded(self, seeds: Tensor, exclude: Tensor | None) -> HopBatch:
        """The static-shape execution: pad the seeds, run (or replay) it, cut to the sizes."""
        num_seeds = seeds.numel()
        # pad to the largest batch so far: a short last batch reuses the captured graph
        self._capacity = capacity = max(self._capacity, num_seeds)
        padded = torch.full((capacity,), self.num_nodes, dtype=torch.int64, device=seeds.device)
        padded[:num_seeds] = seeds
        if self.cuda_graph:
            keys = None if exclude is None else edge_exclusion.padded(exclude, capacity)
            try:
                out = self._replay((capacity, keys is not None), padded, num_seeds, keys)
            except RuntimeError as error:
                self._give_up_graphs(error, "the sampler")
                return self.sample(seeds, exclude)
        else:
            count = torch.tensor(num_seeds, dtype=torch.int64, device=self.device)
            out = self._sample_static(padded.to(self.device), count, exclude)
        sizes = out.counts.tolist()  # the one host sync
        hops = len(self.fanouts)
        nodes, edges = sizes[: hops + 1], sizes[hops + 1 :]
        num_edges, num_targets = sum(edges), sum(nodes[:-1])
        src, dst = out.src[EDGE_TYPE], out.dst[EDGE_TYPE]
        return HopBatch(
            node_ids=out.node_ids[NODE_TYPE][: sum(nodes)].clone(),
            num_seeds=num_seeds,
            num_nodes_per_hop=nodes,
            num_edges_per_hop=edges,
            edge_index=torch.stack([src[:num_edges], dst[:num_edges]]),
            target_ptr=out.target_ptr[EDGE_TYPE][: num_targets + 1].clone(),
        )

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
