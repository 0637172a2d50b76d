"""What a link-prediction job changes in the node path's batches: their sampler, their size,
and the seeds its plans deal out (packed training edges, by the holder that owns the source).

Everything else (plans, pipelines, RPC requests, shared slots, features, the cache) is the
node path's, unchanged: a batch of packed seed edges is a 1-D id tensor like seed nodes.
A typed graph's link batches change the same things: :func:`link_edge_types` reads the
supervised edge type, :func:`typed_train_pairs` its packed training edges and
:func:`link_sampler` builds the typed link sampler (the trainers' in worker mode, the
sampler servers' in server-client mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from distgnn_api.contract import partitions_of_holder
from distgnn_api.edge_types import EdgeType, parse_edge_type_key
from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.link_split import link_meta, read_link_split
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime.features.layout import HolderLayout
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.sampling import NeighborSampler
from distgnn_workload.sampling.link_sampler import HeteroLinkSampler, LinkNeighborSampler
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


def link_edge_types(store_dir: Path) -> tuple[EdgeType, EdgeType | None]:
    """The supervised edge type and the one its reverses were held out of, as the
    partition Job resolved them against the dataset (META.json's ``link`` record)."""
    meta = link_meta(store_dir)
    rev = meta.get("reverse_edge_type")
    return parse_edge_type_key(meta["edge_type"]), None if rev is None else parse_edge_type_key(rev)


def typed_train_pairs(store_dir: Path, num_partitions: int, num_dst: int) -> list[Tensor]:
    """Each partition's training edges, packed (holder ``h`` serves partition ``h``)."""
    out = []
    for p in range(num_partitions):
        split = read_link_split(store_dir, "train", part=p)
        out.append(pack_pairs(split.src, split.dst, num_dst))
    return out


def link_sampler(
    spec: DistGNNJobSpec,
    data: HeteroTrainingData,
    in_csr: Mapping[EdgeType, tuple[Tensor, Tensor]],
    edge_type: EdgeType,
    reverse: EdgeType | None,
    device: torch.device,
    seed: int = 0,
) -> HeteroLinkSampler:
    """The typed link sampler of ``spec`` over ``in_csr`` (worker and server side)."""
    lp = spec.link_prediction
    assert lp is not None
    fanouts = resolve_edge_fanouts(spec.model.fanout, spec.model.edge_fanouts, data.edge_types)
    return HeteroLinkSampler(
        in_csr,
        data.node_counts,
        {et: list(fanouts[et]) for et in data.edge_types},
        edge_type=edge_type,
        reverse=reverse,
        negatives=lp.negatives.per_positive,
        kind=lp.negatives.kind.value,
        device=device,
        seed=seed,
    )
