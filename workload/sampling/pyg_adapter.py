"""``NeighborSampler`` behind PyG's ``BaseSampler`` so it runs under ``NodeLoader``.

PyG's own ``NeighborLoader`` needs pyg-lib or torch-sparse to sample; this adapter needs
neither. The batches it yields carry ``num_sampled_nodes``/``num_sampled_edges``, so PyG's
``trim_to_layer`` works on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    NodeSamplerInput,
    SamplerOutput,
)

from distgnn_workload.sampling.neighbor_sampler import NeighborSampler, csc_from_edge_index


class PyGNeighborSampler(BaseSampler):  # type: ignore[misc]
    """Uniform neighbour sampling for ``torch_geometric.loader.NodeLoader``.

    ``NodeLoader(data, node_sampler=PyGNeighborSampler(data, [15, 10, 5]), input_nodes=...,
    batch_size=...)`` yields ``Data`` mini-batches like ``NeighborLoader`` does: seeds first,
    ``edge_index`` in local ids, ``n_id`` the global ids. Each data-loader worker reseeds its
    copy of the sampler from the worker seed, so workers draw different samples.
    """

    def __init__(
        self,
        data: Data,
        num_neighbors: Sequence[int],
        *,
        device: torch.device | str | None = None,
        seed: int = 0,
    ) -> None:
        if data.edge_index is None:
            raise ValueError("data.edge_index is required to build the sampler's CSC graph")
        num_nodes = data.num_nodes
        if num_nodes is None:
            raise ValueError("data.num_nodes is unknown: set data.num_nodes or data.x")
        indptr, indices = csc_from_edge_index(data.edge_index, num_nodes)
        self.sampler = NeighborSampler(
            indptr, indices, num_neighbors, device=device or data.edge_index.device, seed=seed
        )
        self._output_device = data.edge_index.device
        self._worker_id: int | None = None

    def _reseed_for_worker(self) -> None:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id != self._worker_id:
            self._worker_id = info.id
            self.sampler.reseed(info.seed)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        if index.time is not None:
            raise NotImplementedError("temporal sampling is not supported")
        self._reseed_for_worker()
        hop = self.sampler.sample(index.node).to(self._output_device)
        row: Tensor = hop.edge_index[0]
        col: Tensor = hop.edge_index[1]
        return SamplerOutput(
            node=hop.node_ids,
            row=row,
            col=col,
            edge=None,
            batch=None,
            num_sampled_nodes=hop.num_nodes_per_hop,
            num_sampled_edges=hop.num_edges_per_hop,
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: Any = None) -> SamplerOutput:
        """For ``LinkLoader``: PyG's own edge sampling (its negatives, both ends of every
        edge as seeds, ``edge_label_index`` in the subgraph's ids) over this sampler."""
        from torch_geometric.sampler.neighbor_sampler import edge_sample

        if index.time is not None:
            raise NotImplementedError("temporal sampling is not supported")

        def sample_fn(seed: Tensor, seed_time: Tensor | None) -> SamplerOutput:
            return self.sample_from_nodes(NodeSamplerInput(input_id=None, node=seed))

        out: SamplerOutput = edge_sample(
            index, sample_fn, self.sampler.num_nodes, disjoint=False, neg_sampling=neg_sampling
        )
        return out
