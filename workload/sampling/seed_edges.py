"""Seed edges: how a batch of positive edges travels, and where its rows sit in a HopBatch.

A batch of seed edges travels as one int64 per edge, ``src * num_nodes + dst``, so that the
node path's epoch plans (:mod:`distgnn_workload.runtime.seeds`), pipelines, RPC requests
and shared slots carry it unchanged (a 1-D tensor of ids). The link sampler turns it into
the seed rows of a :class:`~distgnn_workload.sampling.HopBatch`:

``[src (B) | dst (B) | negative src (B*K, uniform only) | negative dst (B*K)]``

for ``B`` positives and ``K`` negatives per positive. ``corruptDestination`` negatives keep
each positive's source (``src[i]`` against ``K`` random destinations), ``uniform`` ones draw
both ends (PyG's binary negative sampling).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

UNIFORM = "uniform"
CORRUPT_DESTINATION = "corruptDestination"
NEGATIVE_KINDS = (UNIFORM, CORRUPT_DESTINATION)


def pack_pairs(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """Edges ``src[i] -> dst[i]`` as single int64 ids (see the module docstring)."""
    if num_nodes > 3_000_000_000:
        raise ValueError(f"{num_nodes} nodes are too many to pack an edge into an int64")
    return src.to(torch.int64) * num_nodes + dst.to(torch.int64)


def unpack_pairs(pairs: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``(src, dst)`` of packed edges."""
    pairs = pairs.to(torch.int64)
    return torch.div(pairs, num_nodes, rounding_mode="floor"), torch.remainder(pairs, num_nodes)


@dataclass(frozen=True)
class LinkLayout:
    """Where the rows of ``positives`` seed edges and their negatives sit among the seeds."""

    positives: int
    negatives: int
    kind: str = UNIFORM

    def __post_init__(self) -> None:
        if self.kind not in NEGATIVE_KINDS:
            raise ValueError(f"negative kind must be one of {NEGATIVE_KINDS}, got {self.kind!r}")
        if self.positives < 0 or self.negatives < 0:
            raise ValueError("positives and negatives per positive must be >= 0")

    @property
    def corrupt(self) -> bool:
        return self.kind == CORRUPT_DESTINATION

    @staticmethod
    def seeds_per_positive(negatives: int, kind: str) -> int:
        return 2 + (negatives if kind == CORRUPT_DESTINATION else 2 * negatives)

    @classmethod
    def of_batch(cls, num_seeds: int, negatives: int, kind: str) -> LinkLayout:
        """The layout of a sampled batch of ``num_seeds`` seed rows."""
        per = cls.seeds_per_positive(negatives, kind)
        if num_seeds % per:
            raise ValueError(f"{num_seeds} seed rows are not a batch of {per} rows per positive")
        return cls(num_seeds // per, negatives, kind)

    @property
    def num_seeds(self) -> int:
        return self.positives * self.seeds_per_positive(self.negatives, self.kind)

    def rows(self, device: torch.device | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Seed rows of ``(pos src, pos dst, neg src, neg dst)``; negatives ``[B*K]``,
        positive ``i``'s ``K`` negatives at ``i*K .. i*K + K - 1``."""
        b, k = self.positives, self.negatives
        pos_src = torch.arange(b, device=device)
        pos_dst = pos_src + b
        if self.corrupt:
            neg_src = pos_src.repeat_interleave(k)
            neg_dst = torch.arange(2 * b, 2 * b + b * k, device=device)
        else:
            neg_src = torch.arange(2 * b, 2 * b + b * k, device=device)
            neg_dst = neg_src + b * k
        return pos_src, pos_dst, neg_src, neg_dst

    def seeds(self, src: Tensor, dst: Tensor, negatives: Tensor) -> Tensor:
        """The seed ids: positives' ends, then ``negatives`` (``[B*K]`` destinations, or
        ``[2*B*K]`` sources then destinations for uniform)."""
        return torch.cat([src, dst, negatives])

    def draw_negatives(
        self, num_nodes: int, generator: torch.Generator, device: torch.device
    ) -> Tensor:
        """Uniform node ids for the negatives, drawn where ``generator`` lives."""
        count = self.positives * self.negatives * (1 if self.corrupt else 2)
        return torch.randint(0, num_nodes, (count,), generator=generator, device=device)
