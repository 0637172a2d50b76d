"""What a link-prediction job changes in the node path's batches: their sampler, their size,
and the seeds its plans deal out (packed training edges, by the holder that owns the source).

Everything else (plans, pipelines, RPC requests, shared slots, features, the cache) is the
node path's, unchanged: a batch of packed seed edges is a 1-D id tensor like seed nodes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_api.contract import partitions_of_holder
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.sampling import NeighborSampler
from distgnn_workload.sampling.link_sampler import LinkNeighborSampler
from distgnn_workload.sampling.seed_edges import LinkLayout, pack_pairs

BatchSampler = NeighborSampler | LinkNeighborSampler


def seed_rows(spec: DistGNNJobSpec) -> int:
    """Seed rows of a full training batch: ``batch_size`` nodes, or for link prediction
    both ends of ``batch_size`` positive edges and their negatives."""
    link = spec.link_prediction
    if not spec.is_link_prediction or link is None:
        return spec.training.batch_size
    per = LinkLayout.seeds_per_positive(link.negatives.per_positive, link.negatives.kind.value)
    return spec.training.batch_size * per


def for_task(spec: DistGNNJobSpec, sampler: NeighborSampler) -> BatchSampler:
    """The sampler of the job's training batches, around the holder's node sampler."""
    link = spec.link_prediction
    if not spec.is_link_prediction or link is None:
        return sampler
    return LinkNeighborSampler(
        sampler,
        negatives=link.negatives.per_positive,
        kind=link.negatives.kind.value,
        exclude_reverse=link.exclude_reverse,
    )


def train_pairs(store: PartitionStore, layout: HolderLayout) -> list[Tensor]:
    """Each holder's training edges, packed: those of its partitions (owner of the source)."""
    from distgnn_workload.partition.link_split import read_link_split

    num_nodes = store.meta.num_nodes
    out = []
    for h in range(layout.num_holders):
        parts = partitions_of_holder(h, store.meta.num_partitions, layout.num_holders)
        pieces = [read_link_split(store.path, "train", part=p) for p in parts]
        out.append(
            torch.cat([pack_pairs(s.src, s.dst, num_nodes) for s in pieces])
            if pieces
            else torch.empty(0, dtype=torch.int64)
        )
    return out
