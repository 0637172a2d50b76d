"""Seed edges: how a batch of positive edges travels, and where its rows sit in a batch.

A batch of ``B`` positive edges of one edge type ``(s, r, d)`` travels as one int64 per
edge, ``src * num_nodes[d] + dst``, so that the node path's epoch plans
(:mod:`distgnn_workload.runtime.seeds`), pipelines, RPC requests and shared slots carry it
unchanged (a 1-D tensor of ids). The link samplers turn it into seed rows per node type,
``K`` negatives per positive:

- ``s == d`` (a relation within one type; a homogeneous graph's one edge type
  :data:`~distgnn_workload.data.graph.EDGE_TYPE`): the one type's rows are
  ``[src (B) | dst (B) | negative src (B*K, uniform only) | negative dst (B*K)]``;
- ``s != d``: type ``s`` gets ``[src (B) | negative src (B*K, uniform only)]`` and type
  ``d`` gets ``[dst (B) | negative dst (B*K)]``.

``corruptDestination`` negatives keep each positive's source (``src[i]`` against ``K``
random destinations), ``uniform`` ones draw both ends (PyG's binary negative sampling),
uniformly over the node type of their end.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE

UNIFORM = "uniform"
CORRUPT_DESTINATION = "corruptDestination"
NEGATIVE_KINDS = (UNIFORM, CORRUPT_DESTINATION)

LinkRows = tuple[Tensor, Tensor, Tensor, Tensor]
"""Rows of ``(pos src, pos dst, neg src, neg dst)``: sources index the source type's seed
rows, destinations the destination type's."""


def pack_pairs(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """Edges ``src[i] -> dst[i]`` as single int64 ids (``num_nodes``: of the destination type)."""
    if num_nodes > 3_000_000_000:
        raise ValueError(f"{num_nodes} nodes are too many to pack an edge into an int64")
    return src.to(torch.int64) * num_nodes + dst.to(torch.int64)


def unpack_pairs(pairs: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``(src, dst)`` of packed edges."""
    pairs = pairs.to(torch.int64)
    return torch.div(pairs, num_nodes, rounding_mode="floor"), torch.remainder(pairs, num_nodes)


@dataclass(frozen=True)
class LinkLayout:
    """Where ``positives`` seed edges of ``edge_type`` and their negatives sit per node type."""

    positives: int
    negatives: int
    kind: str = UNIFORM
    edge_type: EdgeType = EDGE_TYPE

    def __post_init__(self) -> None:
        if self.kind not in NEGATIVE_KINDS:
            raise ValueError(f"negative kind must be one of {NEGATIVE_KINDS}, got {self.kind!r}")
        if self.positives < 0 or self.negatives < 0:
            raise ValueError("positives and negatives per positive must be >= 0")

    @property
    def src_type(self) -> str:
        return self.edge_type[0]

    @property
    def dst_type(self) -> str:
        return self.edge_type[2]

    @property
    def one_type(self) -> bool:
        return self.src_type == self.dst_type

    @property
    def corrupt(self) -> bool:
        return self.kind == CORRUPT_DESTINATION

    @staticmethod
    def seeds_per_positive(negatives: int, kind: str) -> int:
        """Seed rows per positive where both ends are of one type."""
        return 2 + (negatives if kind == CORRUPT_DESTINATION else 2 * negatives)

    @classmethod
    def of_batch(cls, num_seeds: int, negatives: int, kind: str) -> LinkLayout:
        """The layout of a sampled batch of ``num_seeds`` seed rows of the one edge type."""
        per = cls.seeds_per_positive(negatives, kind)
        if num_seeds % per:
            raise ValueError(f"{num_seeds} seed rows are not a batch of {per} rows per positive")
        return cls(num_seeds // per, negatives, kind)

    @classmethod
    def of_rows(
        cls, edge_type: EdgeType, rows: dict[str, int], negatives: int, kind: str
    ) -> LinkLayout:
        """The layout of a sampled batch with ``rows[t]`` seed rows of type ``t``."""
        if edge_type[0] == edge_type[2]:
            b = cls.of_batch(rows[edge_type[0]], negatives, kind).positives
        else:
            b, per = rows[edge_type[2]], 1 + negatives
            if b % per:
                raise ValueError(f"{b} destination rows are not a batch of {per} per positive")
            b //= per
        return cls(b, negatives, kind, edge_type)

    @property
    def num_seeds(self) -> int:
        """Seed rows of a one-type layout."""
        return self.positives * self.seeds_per_positive(self.negatives, self.kind)

    def rows(self, device: torch.device | None = None) -> LinkRows:
        """Seed rows of ``(pos src, pos dst, neg src, neg dst)``; negatives ``[B*K]``,
        positive ``i``'s ``K`` negatives at ``i*K .. i*K + K - 1``."""
        b, k = self.positives, self.negatives
        pos_src = torch.arange(b, device=device)
        if not self.one_type:
            neg_dst = torch.arange(b, b + b * k, device=device)
            neg_src = pos_src.repeat_interleave(k) if self.corrupt else neg_dst.clone()
            return pos_src, pos_src.clone(), neg_src, neg_dst
        pos_dst = pos_src + b
        if self.corrupt:
            neg_src = pos_src.repeat_interleave(k)
            neg_dst = torch.arange(2 * b, 2 * b + b * k, device=device)
        else:
            neg_src = torch.arange(2 * b, 2 * b + b * k, device=device)
            neg_dst = neg_src + b * k
        return pos_src, pos_dst, neg_src, neg_dst

    def draw_negatives(
        self, num_src: int, num_dst: int, generator: torch.Generator, device: torch.device
    ) -> tuple[Tensor | None, Tensor]:
        """Uniform negative ``(sources, destinations)``, drawn where ``generator`` lives;
        sources None for corruptDestination. Within one type every id comes from one draw
        (sources first); across two, the destinations are drawn first, then the sources."""
        count = self.positives * self.negatives
        if self.one_type:
            ids = torch.randint(
                0,
                num_dst,
                (count * (1 if self.corrupt else 2),),
                generator=generator,
                device=device,
            )
            return (None, ids) if self.corrupt else (ids[:count], ids[count:])
        dst = torch.randint(0, num_dst, (count,), generator=generator, device=device)
        if self.corrupt:
            return None, dst
        src = torch.randint(0, num_src, (count,), generator=generator, device=device)
        return src, dst

    def seeds(
        self, src: Tensor, dst: Tensor, neg_src: Tensor | None, neg_dst: Tensor
    ) -> dict[str, Tensor]:
        """The seed ids of each type (see the module docstring)."""
        srcs = [src] if neg_src is None else [src, neg_src]
        if self.one_type:
            return {self.src_type: torch.cat([*srcs[:1], dst, *srcs[1:], neg_dst])}
        return {self.src_type: torch.cat(srcs), self.dst_type: torch.cat([dst, neg_dst])}
