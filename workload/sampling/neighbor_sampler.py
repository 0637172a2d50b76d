"""Vectorised uniform neighbour sampling, on CPU or GPU with the same code: one sampler
path for every graph.

Every graph is typed (:mod:`~distgnn_workload.sampling.csr`); a homogeneous graph is the
case of one node type and one edge type. :class:`HeteroNeighborSampler` samples a typed
graph per edge type into a :class:`HeteroHopBatch`; its one-type case, with the
homogeneous API (one CSR, one fanout list, a :class:`HopBatch`), is
:class:`~distgnn_workload.sampling.one_type_sampler.NeighborSampler`, running the same
dynamic execution (:mod:`dynamic_sample`), the same static one (:mod:`static_sample`) and
the same CUDA graph capture (:mod:`graph_capture`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.pinned_copies import to_device, to_host
from distgnn_workload.sampling import relabel
from distgnn_workload.sampling.csr import (
    Fanouts,
    InCSR,
    TypedCSR,
    csc_from_edge_index,
)
from distgnn_workload.sampling.dynamic_sample import Excluded, SampledHop, sample_dynamic
from distgnn_workload.sampling.fitted_caps import FittedCaps, TypedKey
from distgnn_workload.sampling.graph_capture import CUDA_GRAPH_LOCK, CapturedSampler
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.hop_layout import Consts
from distgnn_workload.sampling.random_stream import reset_default_generator
from distgnn_workload.sampling.static_sample import StaticOut, sample_static
from distgnn_workload.sampling.uniform_subset import sample_neighbours

__all__ = [
    "CUDA_GRAPH_LOCK",
    "HeteroNeighborSampler",
    "InCSR",
    "csc_from_edge_index",
    "reset_default_generator",
]


class HeteroNeighborSampler(FittedCaps, CapturedSampler[TypedKey, StaticOut]):
    """Samples L-hop neighbourhoods of a typed graph around seeds of one node type.

    Per hop ``h`` and edge type ``(s, r, d)``, every node of type ``d`` first reached at hop
    ``h - 1`` (the seeds at hop 1) gets ``min(fanout, degree)`` distinct in-neighbours of that
    edge type, a uniformly random subset (without replacement); fanout -1 takes all, 0 none.
    Nodes are de-duplicated per type; the result is a :class:`HeteroHopBatch`.

    Two executions: the *dynamic* one sizes every tensor exactly (two host syncs per hop
    and edge type); the *static* one pads every hop to its bound (:mod:`static_sample`),
    compacts by scatter and syncs once; on CUDA it is captured in a CUDA graph per (seed
    type, batch capacity) and replayed, which removes hundreds of kernel launches per
    batch. ``static_shapes=None`` picks static on CUDA, dynamic on CPU. Relabelling uses a
    global -> local id table per node type: an instance is not safe for concurrent
    ``sample`` calls.
    """

    def __init__(
        self,
        in_csr: InCSR,
        num_nodes: Mapping[str, int],
        fanouts: Fanouts,
        *,
        seed_type: str | None = None,
        device: torch.device | str | None = None,
        seed: int = 0,
        static_shapes: bool | None = None,
        cuda_graph: bool = True,
        return_edge_ids: bool = False,
    ) -> None:
        self.graph = TypedCSR.build(in_csr, num_nodes, device)
        self.device = self.graph.device
        self.fanouts = self.graph.fanouts(fanouts)
        self.num_hops = len(next(iter(self.fanouts.values())))
        if seed_type is not None and seed_type not in self.graph.num_nodes:
            raise ValueError(f"seed_type {seed_type!r} is not a node type of the graph")
        self.seed_type = seed_type
        self.return_edge_ids = return_edge_ids
        bounded = all(k >= 0 for ks in self.fanouts.values() for k in ks)
        self._pick_execution(static_shapes, cuda_graph, bounded=bounded)
        # per node type: global id -> local id of the batch being sampled; -1 = not in it
        self._local = relabel.RelabelTables.empty(self.graph.num_nodes, self.device)
        self._consts: Consts = {}  # the static hops' index tensors, kept with the graphs
        self._start_stream(seed)
        self._capacity: dict[str, int] = {}
        self._start_fitting()

    @property
    def num_nodes(self) -> dict[str, int]:
        return self.graph.num_nodes

    @property
    def edge_types(self) -> list[EdgeType]:
        return self.graph.edge_types

    def _resolve(self, seed_type: str | None) -> str:
        seed_type = seed_type or self.seed_type
        if seed_type is None:
            raise ValueError("no seed type: pass seed_type to sample() or to the sampler")
        return seed_type

    def prepare(self, batch_size: int, seed_type: str | None = None) -> None:
        """On CUDA, capture the graph for batches of up to ``batch_size`` seeds now."""
        seed_type = self._resolve(seed_type)
        if not (self.static_shapes and batch_size > 0):
            return
        capacity = max(self._capacity.get(seed_type, 0), batch_size)
        self._capacity[seed_type] = capacity
        if not self.cuda_graph or (seed_type, capacity) in self._graphs:
            return
        pad = self.graph.num_nodes[seed_type]
        padded = torch.full((capacity,), pad, dtype=torch.int64, device=self.device)
        try:
            self._replay((seed_type, capacity), padded, 0)
        except RuntimeError as error:
            self._give_up_graphs(error, "the typed sampler")

    def sample(self, seeds: Tensor, seed_type: str | None = None) -> HeteroHopBatch:
        """Sample around ``seeds`` (global ids of ``seed_type``; each occurrence is a row).

        Seeds on the host are checked there and copied to the device through pinned
        memory, so that the static execution waits for the device once (its sizes)."""
        seed_type = self._resolve(seed_type)
        seeds = seeds.reshape(-1).to(torch.int64)
        self.graph.check_seeds(seeds, seed_type)
        if self.static_shapes and seeds.numel():
            return self._sample_padded(seeds, seed_type)
        return self._sample_dynamic({seed_type: seeds.to(self.device)}, seed_type)

    def sample_typed(
        self,
        seeds: Mapping[str, Tensor],
        seed_type: str,
        exclude: Excluded = None,
    ) -> HeteroHopBatch:
        """Sample around seeds of several node types at once (the dynamic execution): hop 0
        of type ``t`` is ``seeds[t]`` (each occurrence a row). The batch's ``seed_type`` and
        ``num_seeds`` describe ``seeds[seed_type]``; the other types' seed rows are the first
        ``num_nodes_per_hop[t][0]`` of their ``node_ids`` (link prediction's two ends).

        ``exclude[et]``: sorted keys of edges of ``et`` to leave out, in the key space of
        :meth:`TypedCSR.key_nodes` (:mod:`~distgnn_workload.sampling.edge_exclusion`)."""
        if seed_type not in seeds:
            raise ValueError(f"seed_type {seed_type!r} has no seeds in {sorted(seeds)}")
        typed = {}
        for t, ids in seeds.items():
            ids = ids.reshape(-1).to(torch.int64)
            self.graph.check_seeds(ids, t)
            typed[t] = ids.to(self.device)
        return self._sample_dynamic(typed, seed_type, exclude)

    def _sample_dynamic(
        self, seeds: Mapping[str, Tensor], seed_type: str, exclude: Excluded = None
    ) -> HeteroHopBatch:
        try:
            return sample_dynamic(
                self.graph,
                self._local,
                self.fanouts,
                self._sample_hop,
                seeds,
                seed_type,
                exclude=exclude,
                with_edge_ids=self.return_edge_ids,
            )
        except BaseException:
            self._reset_tables()
            raise

    def _sample_hop(self, edge_type: EdgeType, frontier: Tensor, fanout: int) -> SampledHop:
        """One edge type's hop of the dynamic execution, rows in frontier order.

        Subclasses that sample some hops elsewhere (e.g. over RPC from the partition that
        owns the nodes) override this, leave ``edge_pos`` out and pass
        ``static_shapes=False``; relabelling and the hop layout stay here.
        """
        indptr, indices = self.graph.indptr[edge_type], self.graph.indices[edge_type]
        if fanout == 0 or frontier.numel() == 0:
            none = torch.zeros(0, dtype=torch.int64, device=self.device)
            counts = torch.zeros(frontier.numel(), dtype=torch.int64, device=self.device)
            return SampledHop(none, none, counts, none)
        return SampledHop(*sample_neighbours(indptr, indices, frontier, fanout, self.generator))

    def _sample_padded(self, seeds: Tensor, seed_type: str) -> HeteroHopBatch:
        """The static-shape execution: pad the seeds, run (or replay) it, cut to the sizes."""
        num_seeds = seeds.numel()
        # pad to the largest batch so far: a short last batch reuses the captured graph
        capacity = max(self._capacity.get(seed_type, 0), num_seeds)
        self._capacity[seed_type] = capacity
        pad = self.graph.num_nodes[seed_type]
        padded = torch.full((capacity,), pad, dtype=torch.int64, device=seeds.device)
        padded[:num_seeds] = seeds
        padded = to_device(padded, self.device)
        if self.cuda_graph:
            try:
                out = self._replay((seed_type, capacity), padded, num_seeds)
            except RuntimeError as error:
                self._give_up_graphs(error, "the typed sampler")
                return self.sample(seeds, seed_type)
        else:
            count = torch.full((), num_seeds, dtype=torch.int64, device=self.device)
            out = self._run_static((seed_type, capacity), padded, count, None)
        sizes = to_host(out.counts).tolist()  # the one host sync
        if self._past_caps((seed_type, capacity), sizes):
            return self._sample_dynamic({seed_type: seeds.to(self.device)}, seed_type)
        return out.typed_batch(
            sizes, self.graph, seed_type, num_seeds, self.num_hops, self.return_edge_ids
        )

    def _run_static(
        self, key: TypedKey, seeds: Tensor, num_seeds: Tensor, extra: Tensor | None
    ) -> StaticOut:
        return sample_static(
            self.graph,
            self._local,
            self.fanouts,
            self.generator,
            key[0],
            seeds,
            num_seeds,
            with_edge_ids=self.return_edge_ids,
            caps=self._caps_of(key),
            consts=self._consts,
        )

    def _reset_tables(self) -> None:
        for table in self._local.values():
            table.fill_(-1)
