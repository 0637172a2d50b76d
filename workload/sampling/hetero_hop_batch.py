"""The hop-wise sampled subgraph of a heterogeneous graph: ``HopBatch`` per node and edge type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType


@dataclass
class HeteroHopBatch:
    """A sampled L-hop subgraph of a typed graph around seeds of one node type.

    Per node type ``t``, ``node_ids[t]`` holds global ids of type ``t``: the nodes first
    reached at hop 0 (the seeds, for the seed type only), then hop 1, hop 2, ...; so the
    nodes of hops ``0..h`` are a prefix, as in :class:`HopBatch`. ``num_nodes_per_hop[t]``
    has L + 1 entries. Within a hop, new nodes are numbered in order of first appearance,
    edge type by edge type (in the sampler's edge type order).

    Per edge type ``(s, r, d)``, ``edge_index[et]`` is ``[2, E]``: row 0 indexes
    ``node_ids[s]`` (the sampled neighbour, message source), row 1 indexes ``node_ids[d]``
    (the target). Edges are ordered by hop and, inside a hop, by target, so they are sorted
    by target overall and the edges of hops ``1..h`` are a prefix (PyG ``trim_to_layer``).
    The targets of hop ``h`` are the nodes of type ``d`` new at hop ``h - 1``.
    ``num_edges_per_hop[et]`` has L entries.

    ``target_ptr[et]`` (int64, length ``sum(num_nodes_per_hop[d][:-1]) + 1``) is the CSR
    offset of each target's edges, ``embedding_bag``/segment style: target ``v``'s edges are
    ``edge_index[et][:, target_ptr[et][v]:target_ptr[et][v + 1]]``. Every node of type ``d``
    in hops ``0..L-1`` is a target of every edge type into ``d`` (with no edges where the
    fanout is 0 or it has no in-neighbours).

    ``edge_ids[et]`` (optional) are the sampled edges' positions in the sampler's CSR
    ``indices`` of that edge type.

    Every node type and every edge type of the graph has an entry, possibly empty.
    """

    seed_type: str
    num_seeds: int
    node_ids: dict[str, Tensor]
    num_nodes_per_hop: dict[str, list[int]]
    edge_index: dict[EdgeType, Tensor]
    num_edges_per_hop: dict[EdgeType, list[int]]
    target_ptr: dict[EdgeType, Tensor]
    edge_ids: dict[EdgeType, Tensor] | None = None

    @property
    def num_hops(self) -> int:
        """Number of sampled hops (L)."""
        return len(next(iter(self.num_nodes_per_hop.values()))) - 1

    @property
    def node_types(self) -> list[str]:
        return list(self.node_ids)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.edge_index)

    @property
    def num_nodes(self) -> dict[str, int]:
        """Sampled nodes per node type, seeds included."""
        return {t: sum(n) for t, n in self.num_nodes_per_hop.items()}

    @property
    def num_edges(self) -> int:
        """Sampled edges over all edge types (what the sampled-edges metric counts)."""
        return sum(sum(e) for e in self.num_edges_per_hop.values())

    @property
    def device(self) -> torch.device:
        return self.node_ids[self.seed_type].device

    @property
    def seed_ids(self) -> Tensor:
        """Global ids of the seeds (of ``seed_type``)."""
        return self.node_ids[self.seed_type][: self.num_seeds]

    def seed_rows(self, node_type: str) -> int:
        """Hop-0 rows of ``node_type``: the seeds of that type (``num_seeds`` for
        ``seed_type``; a batch sampled around seeds of several types has others too)."""
        return self.num_nodes_per_hop[node_type][0]

    @property
    def num_seed_rows(self) -> int:
        """Hop-0 rows over every node type (``num_seeds`` when one type is seeded)."""
        return sum(n[0] for n in self.num_nodes_per_hop.values())

    def _map(self, fn: Callable[[Tensor], Tensor]) -> HeteroHopBatch:
        ids = self.edge_ids
        return replace(
            self,
            node_ids={t: fn(v) for t, v in self.node_ids.items()},
            edge_index={et: fn(v) for et, v in self.edge_index.items()},
            target_ptr={et: fn(v) for et, v in self.target_ptr.items()},
            edge_ids=None if ids is None else {et: fn(v) for et, v in ids.items()},
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HeteroHopBatch:
        """Copy the tensors to ``device`` (a no-op for tensors already there)."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> HeteroHopBatch:
        """Page-lock the tensors so that a later ``to(cuda, non_blocking=True)`` is async."""
        return self._map(lambda t: t.pin_memory())

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Tell the CUDA caching allocator that ``stream`` uses these tensors."""

        def record(t: Tensor) -> Tensor:
            t.record_stream(stream)
            return t

        self._map(record)

    def layer_sizes(self, layer: int) -> tuple[dict[str, int], dict[str, int], dict[EdgeType, int]]:
        """``(num_src, num_dst, num_edges)`` that layer ``layer`` (0 = first) works on.

        As in :meth:`HopBatch.layer_sizes`, per type: layer ``l`` of an L-layer model reads
        the nodes of hops ``0..L-l`` (``num_src[t]`` rows of type ``t``), computes outputs
        for the nodes of hops ``0..L-l-1`` (``num_dst[t]``), over the first
        ``num_edges[et]`` edges of each edge type.
        """
        hops = self.num_hops - layer
        if not 1 <= hops <= self.num_hops:
            raise ValueError(f"layer {layer} is out of range for a {self.num_hops}-hop batch")
        num_src = {t: sum(n[: hops + 1]) for t, n in self.num_nodes_per_hop.items()}
        num_dst = {t: sum(n[:hops]) for t, n in self.num_nodes_per_hop.items()}
        num_edges = {et: sum(e[:hops]) for et, e in self.num_edges_per_hop.items()}
        return num_src, num_dst, num_edges
