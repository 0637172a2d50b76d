"""What layer-wise (full-neighbourhood) inference hands a model: one layer over one block.

Layer-wise inference computes layer ``l`` for every node before layer ``l + 1``, reading
each node's whole in-neighbourhood (PyG's ``inference``, DistDGL's examples). A
:class:`NeighbourhoodBlock` is a chunk of destination nodes with all their in-edges; every
model's ``inference_layer(layer, x, block)`` computes exactly what its full-graph forward
computes for those nodes at that layer, with eval semantics (no dropout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from distgnn_workload.sampling.hop_batch import HopBatch


@dataclass(frozen=True)
class NeighbourhoodBlock:
    """Destination nodes with their whole in-neighbourhoods, in local indices.

    ``nodes`` holds global ids: the ``num_dst`` destinations first, then every other
    in-neighbour once. ``src`` is the local index (into ``nodes``) of each in-edge's
    source, grouped by destination: the edges of destination ``i`` are
    ``src[ptr[i]:ptr[i + 1]]``. ``degree`` is the in-degree of each node of ``nodes`` in the
    whole graph (GCN normalises by it). The graph has no self-loops (the store's has none).
    """

    nodes: Tensor
    num_dst: int
    ptr: Tensor
    src: Tensor
    degree: Tensor

    @property
    def num_src(self) -> int:
        return int(self.nodes.numel())

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    def dst(self) -> Tensor:
        """The local destination of each edge (``src``'s partner)."""
        counts = self.ptr[1:] - self.ptr[:-1]
        return torch.repeat_interleave(
            torch.arange(self.num_dst, device=self.src.device, dtype=self.src.dtype), counts
        )

    def edge_index(self) -> Tensor:
        """``[2, E]`` (source, destination) in local indices, PyG's layout."""
        return torch.stack([self.src, self.dst()])


class LayerwiseModel(Protocol):
    """A model that layer-wise inference can run: its layers, one at a time."""

    num_layers: int

    def inference_layer(self, layer: int, x: Tensor, block: NeighbourhoodBlock) -> Tensor:
        """Layer ``layer``'s output (after its activation, if any) for the block's
        destinations; ``x`` holds the previous layer's output of ``block.nodes``."""
        ...


def full_graph_hop(indptr: Tensor, indices: Tensor, num_layers: int) -> HopBatch:
    """The whole graph as one HopBatch: every node a seed, every edge in every layer.

    A model's plain ``forward(x, full_graph_hop(...))`` is then its full-graph forward pass
    (row i of the CSR lists node i's in-neighbours, as the sampler reads it).
    """
    num_nodes = indptr.numel() - 1
    counts = indptr[1:] - indptr[:-1]
    dst = torch.repeat_interleave(torch.arange(num_nodes, dtype=torch.int64), counts)
    return HopBatch(
        node_ids=torch.arange(num_nodes, dtype=torch.int64),
        num_seeds=num_nodes,
        num_nodes_per_hop=[num_nodes] + [0] * num_layers,
        num_edges_per_hop=[int(indices.numel())] + [0] * (num_layers - 1),
        edge_index=torch.stack([indices.to(torch.int64), dst]),
        target_ptr=indptr.to(torch.int64),
    )
