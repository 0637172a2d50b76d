"""The hop-wise sampled subgraph that the sampler produces and the models consume."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor


@dataclass
class HopBatch:
    """A sampled L-hop subgraph around a batch of seeds, laid out hop by hop.

    ``node_ids`` holds global ids: the seeds first, then the nodes first reached at hop 1,
    hop 2, ... ``edge_index`` is ``[2, E]`` in local indices (row 0 = neighbour/source,
    row 1 = target), ordered by hop and, inside a hop, by target, so the edges of hops
    ``1..h`` are a prefix (PyG ``trim_to_layer`` semantics). The targets of hop ``h`` are
    exactly the nodes new at hop ``h - 1``.

    ``target_ptr`` (optional, int64, length ``sum(num_nodes_per_hop[:-1]) + 1``) is the CSR
    offset of each target's edges: the edges of local node ``v`` are
    ``edge_index[:, target_ptr[v]:target_ptr[v + 1]]``. The sampler always fills it; code
    that builds a HopBatch by hand may leave it out and the models derive it.
    """

    node_ids: Tensor
    num_seeds: int
    num_nodes_per_hop: list[int]
    num_edges_per_hop: list[int]
    edge_index: Tensor
    target_ptr: Tensor | None = None

    @property
    def num_hops(self) -> int:
        """Number of sampled hops (L)."""
        return len(self.num_edges_per_hop)

    @property
    def num_nodes(self) -> int:
        """Total number of sampled nodes, seeds included."""
        return sum(self.num_nodes_per_hop)

    @property
    def num_edges(self) -> int:
        """Total number of sampled edges (what the sampled-edges metric counts)."""
        return sum(self.num_edges_per_hop)

    @property
    def device(self) -> torch.device:
        return self.node_ids.device

    @property
    def seed_ids(self) -> Tensor:
        """Global ids of the seeds."""
        return self.node_ids[: self.num_seeds]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HopBatch:
        """Copy the tensors to ``device`` (a no-op for tensors already there)."""
        ptr = self.target_ptr
        return replace(
            self,
            node_ids=self.node_ids.to(device, non_blocking=non_blocking),
            edge_index=self.edge_index.to(device, non_blocking=non_blocking),
            target_ptr=None if ptr is None else ptr.to(device, non_blocking=non_blocking),
        )

    def pin_memory(self) -> HopBatch:
        """Page-lock the tensors so that a later ``to(cuda, non_blocking=True)`` is async."""
        ptr = self.target_ptr
        return replace(
            self,
            node_ids=self.node_ids.pin_memory(),
            edge_index=self.edge_index.pin_memory(),
            target_ptr=None if ptr is None else ptr.pin_memory(),
        )

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Tell the CUDA caching allocator that ``stream`` uses these tensors."""
        self.node_ids.record_stream(stream)
        self.edge_index.record_stream(stream)
        if self.target_ptr is not None:
            self.target_ptr.record_stream(stream)

    def layer_sizes(self, layer: int) -> tuple[int, int, int]:
        """``(num_src, num_dst, num_edges)`` that layer ``layer`` (0 = first) works on.

        Layer ``l`` of an L-layer model reads the nodes of hops ``0..L-l`` and computes
        outputs for the nodes of hops ``0..L-l-1``, over the edges of hops ``1..L-l``.
        """
        hops = self.num_hops - layer
        if not 1 <= hops <= self.num_hops:
            raise ValueError(f"layer {layer} is out of range for a {self.num_hops}-hop batch")
        num_src = sum(self.num_nodes_per_hop[: hops + 1])
        num_dst = sum(self.num_nodes_per_hop[:hops])
        num_edges = sum(self.num_edges_per_hop[:hops])
        return num_src, num_dst, num_edges

    def get_target_ptr(self) -> Tensor:
        """CSR offsets of the targets' edges; derived from ``edge_index`` if not given.

        Deriving them assumes what the sampler guarantees: edges sorted by target.
        """
        if self.target_ptr is not None:
            return self.target_ptr
        num_targets = sum(self.num_nodes_per_hop[:-1])
        col = self.edge_index[1]
        counts = torch.bincount(col, minlength=num_targets)[:num_targets]
        ptr = torch.zeros(num_targets + 1, dtype=torch.int64, device=col.device)
        torch.cumsum(counts, 0, out=ptr[1:])
        self.target_ptr = ptr
        return ptr
