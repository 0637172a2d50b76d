"""Link-prediction sampling: a batch of seed edges, its negatives, and one subgraph around all.

The subgraph is the node sampler's, seeded with both ends of every positive and every
negative (:class:`~distgnn_workload.sampling.seed_edges.LinkLayout`); negatives are drawn
uniformly over the nodes with the node sampler's generator, on the device of its graph;
the batch's positive edges (and, with ``exclude_reverse``, their reverses) are left out of
the subgraph (:mod:`~distgnn_workload.sampling.edge_exclusion`), as DGL GraphBolt's
``exclude_seed_edges`` does. Training only: evaluation ranks fixed negatives over
full-neighbourhood embeddings (:mod:`distgnn_workload.evaluation.link_ranking`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_workload.sampling.edge_exclusion import excluded_keys
from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.neighbor_sampler import NeighborSampler
from distgnn_workload.sampling.seed_edges import UNIFORM, LinkLayout, unpack_pairs


class LinkNeighborSampler:
    """Samples the subgraph of a batch of packed seed edges (``seed_edges.pack_pairs``)."""

    def __init__(
        self,
        nodes: NeighborSampler,
        *,
        negatives: int = 1,
        kind: str = UNIFORM,
        exclude_reverse: bool = True,
    ) -> None:
        LinkLayout(0, negatives, kind)  # validates
        self.nodes = nodes
        self.negatives = negatives
        self.kind = kind
        self.exclude_reverse = exclude_reverse

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
        return LinkLayout(positives, self.negatives, self.kind)

    def reseed(self, seed: int) -> None:
        self.nodes.reseed(seed)

    def prepare(self, batch_size: int) -> None:
        """Get ready for batches of up to ``batch_size`` positives (see the node sampler's)."""
        self.nodes.prepare(self.layout(batch_size).num_seeds, excluding=True)

    def sample(self, pairs: Tensor) -> HopBatch:
        """The subgraph of the packed positive edges ``pairs`` and of their negatives."""
        src, dst = unpack_pairs(pairs.reshape(-1).to(self.device), self.num_nodes)
        layout = self.layout(src.numel())
        negatives = layout.draw_negatives(self.num_nodes, self.nodes.generator, self.device)
        exclude = excluded_keys(src, dst, self.num_nodes, reverse=self.exclude_reverse)
        return self.nodes.sample(layout.seeds(src, dst, negatives), exclude)
