"""Link-prediction sampling: a batch of seed edges of one edge type, its negatives, and one
subgraph around both ends of all of them, for both graph kinds.

A batch of packed positive edges of the target type ``(s, r, d)`` is unpacked, ``K``
negatives per positive are drawn with the node sampler's generator on the device of its
graph (uniform: a random source of ``s`` and a random destination of ``d``;
corruptDestination: the positive's source and a random destination of ``d``), and the node
sampler samples around the seeds of both ends
(:class:`~distgnn_workload.sampling.seed_edges.LinkLayout`); :class:`LinkSeeds` is that part,
one for both samplers. A homogeneous graph is the one-type case: its one edge type
:data:`~distgnn_workload.data.graph.EDGE_TYPE`.

The batch's positive edges and, where the graph has one, their reverses (the ``reverse``
edge type, ``(d, rev_r, s)`` as ToUndirected names it; a relation within one type holds
both directions itself) are left out of the subgraph, as PyG's ``LinkNeighborLoader`` and
DGL GraphBolt's ``exclude_seed_edges(include_reverse_edges=True)`` do: the edges are
dropped after the draw (:mod:`~distgnn_workload.sampling.edge_exclusion`'s keys), so an
endpoint that drew one has one neighbour fewer at that hop.

- :class:`LinkNeighborSampler`: over the homogeneous :class:`NeighborSampler`, whose static
  execution (CUDA-graph captured) takes the excluded keys as an input;
- :class:`HeteroLinkSampler`: over the typed sampler, the dynamic execution only (no CUDA
  graph yet).

Training only: evaluation ranks fixed negatives over full-neighbourhood embeddings
(:mod:`distgnn_workload.evaluation.link_ranking`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.sampling.csr import Fanouts, type_key
from distgnn_workload.sampling.edge_exclusion import excluded_keys
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.neighbor_sampler import (
    HeteroNeighborSampler,
    InCSR,
)
from distgnn_workload.sampling.one_type_sampler import NeighborSampler
from distgnn_workload.sampling.seed_edges import UNIFORM, LinkLayout, unpack_pairs


@dataclass(frozen=True)
class LinkSeeds:
    """What turns a batch of packed seed edges of ``edge_type`` into seeds and exclusions.

    ``reverse``: the edge type whose ``dst -> src`` edges are left out too (``edge_type``
    itself for a relation within one type, which holds both directions), or None.
    """

    edge_type: EdgeType
    reverse: EdgeType | None
    negatives: int
    kind: str

    def __post_init__(self) -> None:
        self.layout(0)  # validates

    def layout(self, positives: int) -> LinkLayout:
        return LinkLayout(positives, self.negatives, self.kind, self.edge_type)

    def draw(
        self,
        pairs: Tensor,
        num_nodes: Mapping[str, int],
        generator: torch.Generator,
        device: torch.device,
    ) -> tuple[dict[str, Tensor], dict[EdgeType, Tensor]]:
        """Seeds per node type of the packed positives ``pairs`` and of their negatives, and
        per edge type the sorted keys (target, source) of the edges it must not yield."""
        s, _, d = self.edge_type
        src, dst = unpack_pairs(pairs.reshape(-1).to(device), num_nodes[d])
        layout = self.layout(src.numel())
        neg_src, neg_dst = layout.draw_negatives(num_nodes[s], num_nodes[d], generator, device)
        seeds = layout.seeds(src, dst, neg_src, neg_dst)
        # both ends' ids fit one key space: the larger type's count (the samplers' key_nodes)
        n = max(num_nodes[s], num_nodes[d])
        if self.reverse == self.edge_type:  # within one type: it holds both directions
            return seeds, {self.edge_type: excluded_keys(src, dst, n, reverse=True)}
        exclusion = {self.edge_type: excluded_keys(src, dst, n, reverse=False)}
        if self.reverse is not None:
            exclusion[self.reverse] = excluded_keys(dst, src, n, reverse=False)
        return seeds, exclusion


class LinkNeighborSampler:
    """Samples the homogeneous subgraph of a batch of packed seed edges (``pack_pairs``)."""

    def __init__(
        self,
        nodes: NeighborSampler,
        *,
        negatives: int = 1,
        kind: str = UNIFORM,
        exclude_reverse: bool = True,
    ) -> None:
        self.link = LinkSeeds(EDGE_TYPE, EDGE_TYPE if exclude_reverse else None, negatives, kind)
        self.nodes = nodes

    @property
    def device(self) -> torch.device:
        return self.nodes.device

    @property
    def num_nodes(self) -> int:
        return self.nodes.num_nodes

    @property
    def fanouts(self) -> list[int]:
        return self.nodes.fanouts

    def layout(self, positives: int) -> LinkLayout:
        return self.link.layout(positives)

    def reseed(self, seed: int) -> None:
        self.nodes.reseed(seed)

    def prepare(self, batch_size: int) -> None:
        """Get ready for batches of up to ``batch_size`` positives (see the node sampler's)."""
        self.nodes.prepare(self.layout(batch_size).num_seeds, excluding=True)

    def sample(self, pairs: Tensor) -> HopBatch:
        """The subgraph of the packed positive edges ``pairs`` and of their negatives."""
        counts = {NODE_TYPE: self.num_nodes}
        seeds, exclude = self.link.draw(pairs, counts, self.nodes.generator, self.device)
        return self.nodes.sample(seeds[NODE_TYPE], exclude[EDGE_TYPE])


class HeteroLinkSampler(HeteroNeighborSampler):
    """Samples the typed subgraph of a batch of packed seed edges of ``edge_type``.

    :meth:`sample` takes packed pairs (``src * num_nodes[d] + dst``), not seed nodes.
    ``reverse``: as in :class:`LinkSeeds`.
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
        self.link = LinkSeeds(edge_type, reverse, negatives, kind)

    def layout(self, positives: int) -> LinkLayout:
        return self.link.layout(positives)

    def prepare(self, batch_size: int, seed_type: str | None = None) -> None:
        """Nothing to capture: link batches run the dynamic execution."""

    def sample(self, seeds: Tensor, seed_type: str | None = None) -> HeteroHopBatch:
        """The typed subgraph of the packed positive edges ``seeds`` and of their negatives."""
        typed, exclude = self.link.draw(seeds, self.graph.num_nodes, self.generator, self.device)
        return self.sample_typed(typed, self.link.edge_type[0], exclude)
