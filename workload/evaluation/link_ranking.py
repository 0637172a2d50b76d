"""Ranking evaluation of link prediction: MRR and Hits@K against fixed negatives, as OGB does.

Each positive edge ``(s, d)`` is scored against its ``K`` negatives ``(s, d'_1..d'_K)``
(written once into the store, so every process ranks against the same ones). Its rank is
OGB's ``0.5 * (optimistic + pessimistic) + 1``: ties count half (ogb.linkproppred.Evaluator).

Embeddings come from full-neighbourhood layer-wise inference
(:class:`~distgnn_workload.evaluation.LayerwiseInference`), all-gathered so every rank reads
any node's row; each rank ranks its contiguous share of the split's positives; the ranks are
gathered over the host control group and reduced in the split's order, so the figures are
exactly those of one process ranking every positive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE
from distgnn_workload.evaluation.inference import LayerwiseInference

RANK_CHUNK_PAIRS = 1 << 20
"""Pairs scored at once: bounds the memory of a chunk of positives and their negatives."""

GatherRanks = Callable[[Tensor], list[Tensor]]
"""Every rank's ranks, in rank order (every rank must call)."""


def ranks_against(pos: Tensor, neg: Tensor) -> Tensor:
    """OGB's rank of each positive score ``pos[i]`` among ``neg[i, :]`` (float64)."""
    pos = pos.reshape(-1, 1)
    optimistic = (neg > pos).sum(1)
    pessimistic = (neg >= pos).sum(1)
    return 0.5 * (optimistic + pessimistic).to(torch.float64) + 1


@dataclass(frozen=True)
class LinkMetrics:
    """MRR and Hits@K of a split; ``count`` positives were ranked."""

    mrr: float
    hits: dict[int, float] = field(default_factory=dict)
    count: int = 0

    def as_dict(self) -> dict[str, float]:
        return {"mrr": self.mrr, **{f"hits@{k}": v for k, v in self.hits.items()}}


def metrics_of(ranks: Tensor, hits_at: Sequence[int]) -> LinkMetrics:
    """MRR and Hits@K of a vector of ranks (summed in its order, in float64)."""
    ranks = ranks.to(torch.float64).cpu()
    n = ranks.numel()
    if n == 0:
        return LinkMetrics(mrr=0.0, hits={k: 0.0 for k in hits_at}, count=0)
    return LinkMetrics(
        mrr=float((1.0 / ranks).mean()),
        hits={int(k): float((ranks <= k).to(torch.float64).mean()) for k in hits_at},
        count=n,
    )


def share(count: int, rank: int, world_size: int) -> tuple[int, int]:
    """The positives ``[lo, hi)`` that ``rank`` ranks."""
    return rank * count // world_size, (rank + 1) * count // world_size


@torch.no_grad()
def rank_share(
    embed: Callable[[Tensor], Tensor],
    decoder: nn.Module,
    src: Tensor,
    dst: Tensor,
    dst_neg: Tensor | None,
    num_nodes: int = 0,
    *,
    chunk_pairs: int = RANK_CHUNK_PAIRS,
    embed_dst: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """Ranks of the positives ``src -> dst`` against ``src -> dst_neg[i, :]`` (float64).

    ``embed(ids)`` returns the embeddings of node ids on the compute device;
    ``embed_dst`` those of destination ids where they are of another node type (a
    heterogeneous edge type). Without ``dst_neg``, each positive ranks against every other
    of the ``num_nodes`` (destination) nodes as a destination (its own left out).
    """
    embed_d = embed if embed_dst is None else embed_dst
    if dst_neg is None:
        k = num_nodes
        every = torch.arange(num_nodes)
    elif dst_neg.dim() != 2 or dst_neg.size(0) != src.numel():
        raise ValueError(f"dst_neg must be [{src.numel()}, K], got {list(dst_neg.shape)}")
    else:
        k = dst_neg.size(1)
    step = max(1, chunk_pairs // max(k + 1, 1))
    out = []
    for a in range(0, src.numel(), step):
        s, d = src[a : a + step], dst[a : a + step]
        n = every.expand(s.numel(), k) if dst_neg is None else dst_neg[a : a + step]
        z_s = embed(s)
        pos = decoder(z_s, embed_d(d)).float()
        z_n = embed_d(n.reshape(-1)).reshape(n.size(0), k, -1)
        neg = decoder(z_s.unsqueeze(1).expand(-1, k, -1), z_n).float()
        if dst_neg is None:
            neg = neg.masked_fill(n.to(neg.device) == d.to(neg.device).unsqueeze(1), -torch.inf)
        out.append(ranks_against(pos, neg).cpu())
    return torch.cat(out) if out else torch.empty(0, dtype=torch.float64)


def gathered_metrics(
    local_ranks: Tensor, gather: GatherRanks, hits_at: Sequence[int]
) -> LinkMetrics:
    """The split's figures from every rank's share, concatenated in rank (= split) order."""
    return metrics_of(torch.cat(gather(local_ranks.to(torch.float64).cpu())), hits_at)


LinkSplit = tuple[Tensor, Tensor, Tensor | None]
"""``(src, dst, dst_neg)`` of a split's positives; ``dst_neg`` None ranks against every node."""


def evaluate_splits(
    engine: LayerwiseInference,
    encoder: nn.Module,
    decoder: nn.Module,
    splits: Mapping[str, LinkSplit],
    hits_at: Sequence[int],
    gather: GatherRanks,
    edge_type: EdgeType = EDGE_TYPE,
) -> dict[str, LinkMetrics]:
    """MRR and Hits@K of each split of ``edge_type`` (the whole split, the same on every
    rank): the nodes are embedded once, each rank by its share, and each rank ranks its share
    of the edges. Every rank must call, with the same splits."""
    rows = engine.embeddings(encoder)
    s, _, d = edge_type
    return rank_splits(
        rows[s].rows,
        rows[d].rows,
        engine.node_counts[d],
        decoder,
        splits,
        hits_at,
        gather,
        rank=engine.rank,
        world_size=engine.world_size,
    )


def rank_splits(
    embed_src: Callable[[Tensor], Tensor],
    embed_dst: Callable[[Tensor], Tensor],
    num_dst: int,
    decoder: nn.Module,
    splits: Mapping[str, LinkSplit],
    hits_at: Sequence[int],
    gather: GatherRanks,
    *,
    rank: int,
    world_size: int,
) -> dict[str, LinkMetrics]:
    """MRR and Hits@K of each split over embeddings every rank can read (``embed_src`` of
    the sources, ``embed_dst`` of the destinations, of ``num_dst`` nodes): each rank ranks
    its share of the edges; the ranks are gathered. Every rank must call."""
    was_training = decoder.training
    decoder.eval()
    out = {}
    try:
        for name, (src, dst, dst_neg) in splits.items():
            lo, hi = share(src.numel(), rank, world_size)
            neg = None if dst_neg is None else dst_neg[lo:hi]
            local = rank_share(
                embed_src, decoder, src[lo:hi], dst[lo:hi], neg, num_dst, embed_dst=embed_dst
            )
            out[name] = gathered_metrics(local, gather, hits_at)
    finally:
        decoder.train(was_training)
    return out
