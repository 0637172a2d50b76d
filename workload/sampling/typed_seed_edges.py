"""Seed edges of one edge type of a heterogeneous graph: where their rows sit per node type.

A batch of ``B`` positive edges ``(s, r, d)`` travels packed as ``src * num_dst + dst``
(:func:`~distgnn_workload.sampling.seed_edges.pack_pairs` with the destination type's
count), like homogeneous seed edges. Its typed subgraph is seeded per node type:

- ``s != d``: type ``s`` gets ``[src (B) | negative src (B*K, uniform only)]`` and type
  ``d`` gets ``[dst (B) | negative dst (B*K)]``; ``corruptDestination`` keeps each
  positive's source (row ``i`` of ``s`` against ``K`` random destinations);
- ``s == d`` (a relation within one type): the one type's rows are the homogeneous
  :class:`~distgnn_workload.sampling.seed_edges.LinkLayout`'s.

Negatives are uniform over the node type of their end: sources over ``s``, destinations
over ``d``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.seed_edges import CORRUPT_DESTINATION, LinkLayout

TypedRows = tuple[Tensor, Tensor, Tensor, Tensor]
"""Rows of ``(pos src, pos dst, neg src, neg dst)``: sources index the source type's seed
rows, destinations the destination type's."""


@dataclass(frozen=True)
class TypedLinkLayout:
    """Where ``positives`` seed edges of ``edge_type`` and their negatives sit per type."""

    edge_type: EdgeType
    positives: int
    negatives: int
    kind: str

    def __post_init__(self) -> None:
        LinkLayout(self.positives, self.negatives, self.kind)  # validates

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

    @property
    def homogeneous(self) -> LinkLayout:
        return LinkLayout(self.positives, self.negatives, self.kind)

    @classmethod
    def of_rows(
        cls, edge_type: EdgeType, rows: dict[str, int], negatives: int, kind: str
    ) -> TypedLinkLayout:
        """The layout of a sampled batch with ``rows[t]`` seed rows of type ``t``."""
        if edge_type[0] == edge_type[2]:
            b = LinkLayout.of_batch(rows[edge_type[0]], negatives, kind).positives
        else:
            b, per = rows[edge_type[2]], 1 + negatives
            if b % per:
                raise ValueError(f"{b} destination rows are not a batch of {per} per positive")
            b //= per
        return cls(edge_type, b, negatives, kind)

    def draw_negatives(
        self, num_src: int, num_dst: int, generator: torch.Generator, device: torch.device
    ) -> tuple[Tensor | None, Tensor]:
        """Uniform negative ``(sources, destinations)``; sources None for corruptDestination."""
        count = self.positives * self.negatives
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

    def rows(self, device: torch.device | None = None) -> TypedRows:
        """Seed rows of ``(pos src, pos dst, neg src, neg dst)``; positive ``i``'s ``K``
        negatives at ``i*K .. i*K + K - 1``."""
        if self.one_type:
            return self.homogeneous.rows(device)
        b, k = self.positives, self.negatives
        pos = torch.arange(b, device=device)
        neg_dst = torch.arange(b, b + b * k, device=device)
        neg_src = pos.repeat_interleave(k) if self.corrupt else neg_dst.clone()
        return pos, pos.clone(), neg_src, neg_dst
