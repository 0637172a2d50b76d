"""A plain-PyTorch link-prediction reference: the accuracy yardstick of distgnn's link jobs.

PyG's ``LinkNeighborLoader`` needs pyg-lib or torch-sparse, so the sampling is written out
here, as it does it:

- **Batches.** The training positives in a seeded random order, ``batch_size`` at a time.
  Each positive gets ``per_positive`` negatives: ``uniform`` draws both endpoints uniformly
  from the nodes (PyG's ``neg_sampling="binary"``), ``corruptDestination`` keeps the source
  and draws the destination (DGL's uniform sampler).
- **Sampling.** The seed nodes are the distinct endpoints of the positives and negatives.
  Per layer, every node reached for the first time at the previous hop (the seeds at the
  first) gets up to ``fanout`` distinct neighbours, uniformly without replacement, from the
  message-passing topology (training edges only, both directions); the sampled edges of all
  hops form one subgraph, as PyG's loaders return it.
- **Model.** PyG ``SAGEConv`` layers (mean aggregation, root weight), ReLU and dropout
  between them; the decoder scores a pair as the dot product of its two embeddings
  (``dot``), or as ``Linear(h, h) -> ReLU -> Linear(h, 1)`` over their elementwise product
  (``mlp``). Binary cross-entropy with logits over positives (label 1) and negatives
  (label 0), Adam.
- **Evaluation.** Full-neighbourhood embeddings of every node (all layers over the whole
  topology, eval mode), then each valid or test positive ranks against its fixed negative
  destinations (the store's ``dst_neg``; every node when there are none) with OGB's
  evaluator formula: rank = 0.5 * (optimistic + pessimistic) + 1, MRR = mean(1 / rank),
  Hits@K = mean(rank <= K).

Deterministic for a given seed on one CPU thread.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import SAGEConv

from distgnn_workload.partition.link_split import EdgeSplit, read_link_split
from distgnn_workload.partition.store import PartitionStore


@dataclass(frozen=True)
class LinkReferenceData:
    """What the reference trains and evaluates on: features, the message-passing CSR (both
    directions) and the three edge sets, all in one id space."""

    x: Tensor
    indptr: Tensor
    indices: Tensor
    train: EdgeSplit
    valid: EdgeSplit
    test: EdgeSplit

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @classmethod
    def from_store(cls, store_dir: str | Path) -> LinkReferenceData:
        """A link-prediction store's topology, features and splits, in the store's ids."""
        store = PartitionStore.open(store_dir)
        indptr, indices = store.topology()
        parts = [store.partition(p) for p in range(store.num_partitions)]
        x = np.concatenate([np.asarray(p.features) for p in parts])
        return cls(
            x=torch.from_numpy(x.reshape(-1, store.meta.num_features).copy()),
            indptr=torch.from_numpy(np.array(indptr, dtype=np.int64)),
            indices=torch.from_numpy(np.array(indices, dtype=np.int64)),
            train=read_link_split(store.path, "train"),
            valid=read_link_split(store.path, "valid"),
            test=read_link_split(store.path, "test"),
        )

    def edge_index(self) -> Tensor:
        """The topology as PyG's [2, E] (source row, target row): messages flow j -> i."""
        dst = torch.repeat_interleave(torch.arange(self.num_nodes), self.indptr.diff())
        return torch.stack([self.indices, dst])


class Encoder(nn.Module):
    """GraphSAGE: SAGEConv layers with ReLU and dropout between them."""

    def __init__(self, in_channels: int, hidden: int, num_layers: int, dropout: float) -> None:
        super().__init__()
        sizes = [in_channels] + [hidden] * num_layers
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in itertools.pairwise(sizes))
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


class Decoder(nn.Module):
    """A pair's score: dot product, or an MLP over the elementwise product."""

    def __init__(self, kind: str, hidden: int) -> None:
        super().__init__()
        if kind not in ("dot", "mlp"):
            raise ValueError(f"decoder must be dot or mlp, not {kind!r}")
        self.mlp = (
            nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
            if kind == "mlp"
            else None
        )

    def forward(self, hs: Tensor, hd: Tensor) -> Tensor:
        if self.mlp is None:
            return (hs * hd).sum(-1)
        out: Tensor = self.mlp(hs * hd).squeeze(-1)
        return out


def sample_subgraph(
    seeds: Tensor, fanouts: Sequence[int], indptr: Tensor, indices: Tensor, gen: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Uniform neighbour sampling from ``seeds`` (distinct); returns the subgraph's nodes
    (seeds first) and its [2, E] edge index in local ids (neighbour -> node)."""
    n = len(indptr) - 1
    local = torch.full((n,), -1, dtype=torch.long)
    nodes = [seeds]
    local[seeds] = torch.arange(len(seeds))
    count = len(seeds)
    frontier = seeds
    rows: list[Tensor] = []
    cols: list[Tensor] = []
    for fanout in fanouts:
        start = indptr[frontier]
        deg = indptr[frontier + 1] - start
        total = int(deg.sum())
        if total == 0:
            break
        owner = torch.repeat_interleave(torch.arange(len(frontier)), deg)
        offset = torch.cumsum(deg, 0) - deg
        pos = start[owner] + torch.arange(total) - offset[owner]
        # A random order within each row: sort by (row, random key).
        order = torch.argsort(owner.double() + torch.rand(total, generator=gen, dtype=torch.double))
        rank = torch.arange(total) - offset[owner[order]]
        chosen = order[rank < fanout]
        nbr = indices[pos[chosen]]
        target = frontier[owner[chosen]]
        fresh = torch.unique(nbr[local[nbr] < 0])
        local[fresh] = torch.arange(count, count + len(fresh))
        count += len(fresh)
        nodes.append(fresh)
        rows.append(local[nbr])
        cols.append(local[target])
        frontier = fresh
        if len(fresh) == 0:
            break
    edge_index = (
        torch.stack([torch.cat(rows), torch.cat(cols)])
        if rows
        else torch.zeros((2, 0), dtype=torch.long)
    )
    return torch.cat(nodes), edge_index


def ranking_metrics(pos: Tensor, neg: Tensor, hits_at: Sequence[int]) -> dict[str, float]:
    """MRR and Hits@K of positives ``pos`` [E] against their negatives ``neg`` [E, K], as
    OGB's evaluator computes them (ties count half)."""
    optimistic = (neg > pos[:, None]).sum(1)
    pessimistic = (neg >= pos[:, None]).sum(1)
    rank = 0.5 * (optimistic + pessimistic).double() + 1
    out = {"mrr": float((1.0 / rank).mean())}
    out.update({f"hits@{k}": float((rank <= k).double().mean()) for k in hits_at})
    return out


def negatives(
    src: Tensor, per_positive: int, kind: str, num_nodes: int, gen: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Training negatives: ``per_positive`` pairs per positive."""
    size = len(src) * per_positive
    dst = torch.randint(0, num_nodes, (size,), generator=gen)
    if kind == "corruptDestination":
        return src.repeat_interleave(per_positive), dst
    if kind != "uniform":
        raise ValueError(f"negative kind must be uniform or corruptDestination, not {kind!r}")
    return torch.randint(0, num_nodes, (size,), generator=gen), dst


@torch.no_grad()
def evaluate(
    encoder: Encoder,
    decoder: Decoder,
    data: LinkReferenceData,
    hits_at: Sequence[int],
    splits: Sequence[str] = ("valid", "test"),
) -> dict[str, float]:
    """Full-neighbourhood ranking metrics of each split, as ``<split>_mrr`` and
    ``<split>_hits@K``."""
    encoder.eval()
    decoder.eval()
    h = encoder(data.x, data.edge_index())
    out: dict[str, float] = {}
    for name in splits:
        edges: EdgeSplit = getattr(data, name)
        hs = h[edges.src]
        pos = decoder(hs, h[edges.dst])
        if edges.dst_neg is None:
            everyone = torch.arange(data.num_nodes)
            neg = torch.stack(
                [decoder(hs[i].expand(data.num_nodes, -1), h[everyone]) for i in range(len(hs))]
            )
        else:
            neg = decoder(hs[:, None, :], h[edges.dst_neg])
        out.update({f"{name}_{k}": v for k, v in ranking_metrics(pos, neg, hits_at).items()})
    return out


def train_reference(
    data: LinkReferenceData | str | Path,
    *,
    hidden: int = 64,
    fanouts: Sequence[int] = (10, 5),
    epochs: int = 5,
    batch_size: int = 512,
    lr: float = 0.01,
    decoder: str = "dot",
    per_positive: int = 1,
    negative_kind: str = "uniform",
    dropout: float = 0.0,
    hits_at: Sequence[int] = (10, 50, 100),
    seed: int = 0,
) -> dict[str, float]:
    """Train GraphSAGE + decoder on the training positives and return the last epoch's
    mean loss with the valid and test MRR and Hits@K (keys ``loss``, ``valid_mrr``,
    ``test_hits@10``, ...). ``data`` is a store directory or the tensors."""
    if not isinstance(data, LinkReferenceData):
        data = LinkReferenceData.from_store(data)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    encoder = Encoder(data.x.shape[1], hidden, len(fanouts), dropout)
    dec = Decoder(decoder, hidden)
    opt = torch.optim.Adam([*encoder.parameters(), *dec.parameters()], lr=lr)
    n = data.num_nodes
    src_all, dst_all = data.train.src, data.train.dst
    loss_sum = 0.0
    for _ in range(epochs):
        encoder.train()
        dec.train()
        perm = torch.randperm(len(src_all), generator=gen)
        loss_sum, batches = 0.0, 0
        for a in range(0, len(perm), batch_size):
            ix = perm[a : a + batch_size]
            src, dst = src_all[ix], dst_all[ix]
            nsrc, ndst = negatives(src, per_positive, negative_kind, n, gen)
            ends = torch.cat([src, dst, nsrc, ndst])
            seeds, inverse = torch.unique(ends, return_inverse=True)
            nodes, edge_index = sample_subgraph(seeds, fanouts, data.indptr, data.indices, gen)
            h = encoder(data.x[nodes], edge_index)[inverse]
            b, k = len(src), len(nsrc)
            pos = dec(h[:b], h[b : 2 * b])
            neg = dec(h[2 * b : 2 * b + k], h[2 * b + k :])
            logits = torch.cat([pos, neg])
            labels = torch.cat([torch.ones(b), torch.zeros(k)])
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            loss_sum += float(loss.detach())
            batches += 1
        loss_sum /= max(1, batches)
    return {"loss": loss_sum, **evaluate(encoder, dec, data, hits_at)}
