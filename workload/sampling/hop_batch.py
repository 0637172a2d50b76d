"""The hop-wise sampled subgraph that the samplers produce and the models consume.

A typed graph's batch is a :class:`HeteroHopBatch`: per node type its nodes, per edge type its
edges, laid out hop by hop. A homogeneous graph's batch is its one-type case; the
:class:`HopBatch` holds that case's tensors directly (what the GraphSAGE step reads) and
:meth:`HopBatch.typed` views it as a :class:`HeteroHopBatch` without copies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Self

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE


def _layer_hops(layer: int, num_hops: int) -> int:
    """Hops that layer ``layer`` (0 = first) of an L-layer model works on: ``L - layer``."""
    hops = num_hops - layer
    if not 1 <= hops <= num_hops:
        raise ValueError(f"layer {layer} is out of range for a {num_hops}-hop batch")
    return hops


class _Tensors:
    """A batch's tensor moves, each through the batch's ``_map`` of every tensor."""

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Self:
        raise NotImplementedError

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Self:
        """Copy the tensors to ``device`` (a no-op for tensors already there)."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Self:
        """Page-lock the tensors so that a later ``to(cuda, non_blocking=True)`` is async."""
        return self._map(lambda t: t.pin_memory())

    def record_stream(self, stream: torch.cuda.Stream) -> None:
        """Tell the CUDA caching allocator that ``stream`` uses these tensors."""

        def record(t: Tensor) -> Tensor:
            t.record_stream(stream)
            return t

        self._map(record)


@dataclass
class HopBatch(_Tensors):
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

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Self:
        ptr = self.target_ptr
        return replace(
            self,
            node_ids=fn(self.node_ids),
            edge_index=fn(self.edge_index),
            target_ptr=None if ptr is None else fn(ptr),
        )

    def layer_sizes(self, layer: int) -> tuple[int, int, int]:
        """``(num_src, num_dst, num_edges)`` that layer ``layer`` (0 = first) works on.

        Layer ``l`` of an L-layer model reads the nodes of hops ``0..L-l`` and computes
        outputs for the nodes of hops ``0..L-l-1``, over the edges of hops ``1..L-l``.
        """
        hops = _layer_hops(layer, self.num_hops)
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

    def typed(self) -> HeteroHopBatch:
        """This batch as the one-type case of a typed batch, sharing every tensor: node type
        :data:`NODE_TYPE`, edge type :data:`EDGE_TYPE` (the target offsets derived if not
        given)."""
        return HeteroHopBatch(
            seed_type=NODE_TYPE,
            num_seeds=self.num_seeds,
            node_ids={NODE_TYPE: self.node_ids},
            num_nodes_per_hop={NODE_TYPE: self.num_nodes_per_hop},
            edge_index={EDGE_TYPE: self.edge_index},
            num_edges_per_hop={EDGE_TYPE: self.num_edges_per_hop},
            target_ptr={EDGE_TYPE: self.get_target_ptr()},
        )


@dataclass
class HeteroHopBatch(_Tensors):
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

    def one_type(self) -> HopBatch:
        """The one-type batch of :data:`NODE_TYPE` and :data:`EDGE_TYPE` this batch holds,
        sharing every tensor (the inverse of :meth:`HopBatch.typed`)."""
        return HopBatch(
            self.node_ids[NODE_TYPE],
            self.num_seeds,
            self.num_nodes_per_hop[NODE_TYPE],
            self.num_edges_per_hop[EDGE_TYPE],
            self.edge_index[EDGE_TYPE],
            self.target_ptr[EDGE_TYPE],
        )

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

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Self:
        ids = self.edge_ids
        return replace(
            self,
            node_ids={t: fn(v) for t, v in self.node_ids.items()},
            edge_index={et: fn(v) for et, v in self.edge_index.items()},
            target_ptr={et: fn(v) for et, v in self.target_ptr.items()},
            edge_ids=None if ids is None else {et: fn(v) for et, v in ids.items()},
        )

    def layer_sizes(self, layer: int) -> tuple[dict[str, int], dict[str, int], dict[EdgeType, int]]:
        """``(num_src, num_dst, num_edges)`` that layer ``layer`` (0 = first) works on.

        As in :meth:`HopBatch.layer_sizes`, per type: layer ``l`` of an L-layer model reads
        the nodes of hops ``0..L-l`` (``num_src[t]`` rows of type ``t``), computes outputs
        for the nodes of hops ``0..L-l-1`` (``num_dst[t]``), over the first
        ``num_edges[et]`` edges of each edge type.
        """
        hops = _layer_hops(layer, self.num_hops)
        num_src = {t: sum(n[: hops + 1]) for t, n in self.num_nodes_per_hop.items()}
        num_dst = {t: sum(n[:hops]) for t, n in self.num_nodes_per_hop.items()}
        num_edges = {et: sum(e[:hops]) for et, e in self.num_edges_per_hop.items()}
        return num_src, num_dst, num_edges
