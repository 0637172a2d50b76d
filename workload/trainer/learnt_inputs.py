"""The learnt inputs of a typed rank: one embedding table per featureless node type, sharded
over the ranks that serve the partition holding each node, placed within
``spec.trainers.embeddingMemory`` (:mod:`distgnn_workload.embeddings.placement`), and their
row-sparse Adam."""

from __future__ import annotations

import logging

import torch
import torch.distributed as dist

from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
from distgnn_workload.embeddings.placement import host_shards, shard_bytes
from distgnn_workload.runtime.device_budget import device_budget
from distgnn_workload.runtime.training_data import HeteroTrainingData

log = logging.getLogger(__name__)


def rank_tables(
    spec: DistGNNJobSpec,
    data: HeteroTrainingData,
    *,
    rank: int,
    world_size: int,
    device: torch.device,
    ranks_of_holder: list[list[int]],
    host_group: dist.ProcessGroup | None,
    out_dtype: torch.dtype,
) -> tuple[list[ShardedEmbedding], RowSparseAdam | None]:
    """The learnt inputs of ``data``'s featureless types, sharded over the ranks that serve
    the partition holding each node, within ``spec.trainers.embeddingMemory``; and their
    row-sparse Adam (None: no featureless type)."""
    if not data.featureless_types:
        return [], None
    dim = spec.model.embedding_size
    exchange = RowExchange(rank, world_size, device, host_group=host_group)
    owners = [
        RowOwnership.from_partition_book(t, data.book[t], ranks_of_holder, world_size)
        for t in data.featureless_types
    ]
    sizes = [shard_bytes(o.rows_of(rank).numel(), dim, RowSparseAdam.state_rows) for o in owners]
    field = "spec.trainers.embeddingMemory"
    budget = device_budget(spec.trainers.embedding_memory, device, 0, field=field)
    tables = [
        ShardedEmbedding(
            own, dim, exchange, seed=spec.training.seed, out_dtype=out_dtype, host_memory=on_host
        )
        for own, on_host in zip(owners, host_shards(sizes, budget), strict=True)
    ]
    log.info("embedding tables: %s", ", ".join(repr(t) for t in tables))
    return tables, RowSparseAdam(tables, lr=spec.training.learning_rate)
