"""Link-prediction sampling on a typed graph: seed edges of one edge type, their negatives,
and one typed subgraph around both ends of all of them.

The typed counterpart of :class:`~distgnn_workload.sampling.link_sampler.LinkNeighborSampler`:
a batch of packed positive edges of the target type ``(s, r, d)`` is unpacked, ``K``
negatives per positive are drawn on the device of the graph (uniform: a random source of
``s`` and a random destination of ``d``; corruptDestination: the positive's source and a
random destination of ``d``), and :class:`HeteroNeighborSampler` samples around the seeds of
both types (:class:`~distgnn_workload.sampling.typed_seed_edges.TypedLinkLayout`).

The batch's positive edges and, where the graph has one, their reverses (the ``reverse``
edge type, ``(d, rev_r, s)`` as ToUndirected names it; a relation within one type holds
both directions itself) are left out of the subgraph, as PyG's ``LinkNeighborLoader`` and
DGL GraphBolt's ``exclude_seed_edges(include_reverse_edges=True)`` do: the edges are
dropped after the draw (:mod:`~distgnn_workload.sampling.edge_exclusion`'s keys), so an
endpoint that drew one has one neighbour fewer at that hop. The dynamic execution only
(no CUDA graph yet).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import Fanouts, type_key
from distgnn_workload.sampling.edge_exclusion import edge_keys, keep_mask
from distgnn_workload.sampling.hetero_hop_batch import HeteroHopBatch
from distgnn_workload.sampling.hetero_sampler import HeteroNeighborSampler, InCSR, SampledHop
from distgnn_workload.sampling.seed_edges import UNIFORM, unpack_pairs
from distgnn_workload.sampling.typed_seed_edges import TypedLinkLayout


class HeteroLinkSampler(HeteroNeighborSampler):
    """Samples the typed subgraph of a batch of packed seed edges of ``edge_type``.

    :meth:`sample` takes packed pairs (``src * num_nodes[d] + dst``), not seed nodes.
    ``reverse``: the edge type whose ``dst -> src`` edges are left out too (``edge_type``
    itself for a relation within one type, which holds both directions), or None.
    """

    def __init__(
        self,
        in_csr: InCSR,
        num_nodes: Mapping[str, int],
        fanouts: Fanouts,
        *,
        edge_type: EdgeType,
        reverse: EdgeType | None,
        negatives: int = 1,
        kind: str = UNIFORM,
        device: torch.device | str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(
            in_csr,
            num_nodes,
            fanouts,
            seed_type=edge_type[0],
            device=device,
            seed=seed,
            static_shapes=False,
        )
        if edge_type not in self.graph.indptr:
            raise ValueError(f"the graph has no edge type {type_key(edge_type)}")
        if reverse is not None and reverse not in self.graph.indptr:
            raise ValueError(f"the graph has no reverse edge type {type_key(reverse)}")
        TypedLinkLayout(edge_type, 0, negatives, kind)  # validates
        self.edge_type = edge_type
        self.reverse = reverse
        self.negatives = negatives
        self.kind = kind
        # both ends' ids fit one key space: the larger type's count
        self._key_nodes = max(
            self.graph.num_nodes[edge_type[0]], self.graph.num_nodes[edge_type[2]]
        )
        self._excluded: dict[EdgeType, Tensor] = {}

    @property
    def num_dst(self) -> int:
        return self.graph.num_nodes[self.edge_type[2]]

    def layout(self, positives: int) -> TypedLinkLayout:
        return TypedLinkLayout(self.edge_type, positives, self.negatives, self.kind)

    def prepare(self, batch_size: int, seed_type: str | None = None) -> None:
        """Nothing to capture: link batches run the dynamic execution."""

    def sample(self, seeds: Tensor, seed_type: str | None = None) -> HeteroHopBatch:
        """The typed subgraph of the packed positive edges ``seeds`` and of their negatives."""
        src, dst = unpack_pairs(seeds.reshape(-1).to(self.device), self.num_dst)
        layout = self.layout(src.numel())
        s = self.edge_type[0]
        neg_src, neg_dst = layout.draw_negatives(
            self.graph.num_nodes[s], self.num_dst, self.generator, self.device
        )
        self._excluded = self._exclusion(src, dst)
        try:
            return self.sample_typed(layout.seeds(src, dst, neg_src, neg_dst), s)
        finally:
            self._excluded = {}

    def _exclusion(self, src: Tensor, dst: Tensor) -> dict[EdgeType, Tensor]:
        """Sorted keys (target, source) of the edges each edge type must not yield."""
        n = self._key_nodes
        forward, backward = edge_keys(dst, src, n), edge_keys(src, dst, n)
        if self.reverse == self.edge_type:  # within one type: it holds both directions
            return {self.edge_type: torch.sort(torch.cat([forward, backward])).values}
        out = {self.edge_type: torch.sort(forward).values}
        if self.reverse is not None:
            out[self.reverse] = torch.sort(backward).values
        return out

    def _sample_hop(self, edge_type: EdgeType, frontier: Tensor, fanout: int) -> SampledHop:
        hop = super()._sample_hop(edge_type, frontier, fanout)
        keys = self._excluded.get(edge_type)
        if keys is None or hop.neighbours.numel() == 0:
            return hop
        keep = keep_mask(keys, frontier[hop.rows], hop.neighbours, self._key_nodes)
        rows = hop.rows[keep]
        counts = torch.bincount(rows, minlength=frontier.numel()).to(hop.counts.dtype)
        pos = None if hop.edge_pos is None else hop.edge_pos[keep]
        return SampledHop(rows, hop.neighbours[keep], counts, pos)
