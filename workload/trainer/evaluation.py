"""Where a trainer's full-neighbourhood inference reads the graph: topology, inputs, labels.

Both graph kinds run the one engine (:class:`~distgnn_workload.evaluation.LayerwiseInference`);
what differs is what a trainer already holds:

- a homogeneous trainer reads the partition store on the shared volume (:func:`store_inference`:
  the topology, each rank's share of the features, labels and masks by id range), the store
  read as the one-type case;
- a typed trainer (:func:`typed_inference`) reads the topology and the featured rows from its
  own graph where it holds them whole (one trainer over a whole graph), else from the typed
  store (a worker-mode trainer holds the topology but only some rows; a server-client
  trainer holds neither). The featureless types' inputs are the learnt embeddings' rows,
  looked up collectively for each rank's share, every table in the same order on every
  rank; the labels and split ids are the trainer's own (:func:`typed_splits`).

The store, when needed, is at ``partition_dir``, else the contract's partition directory
(:meth:`WorkloadEnv.from_environ`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from distgnn_api.contract import WorkloadEnv
from distgnn_api.edge_types import EdgeType
from distgnn_workload.embeddings import ShardedEmbedding
from distgnn_workload.evaluation.accuracy import HeldSplits, SplitRows, ids_of
from distgnn_workload.evaluation.inference import LayerwiseInference, TypedCSR
from distgnn_workload.evaluation.store_rows import StoreRows, typed_feature_range
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.runtime.training_data import HeteroTrainingData


def store_dir(partition_dir: Path | None) -> Path:
    """``partition_dir``, else the contract's partition directory."""
    return partition_dir or WorkloadEnv.from_environ().partition_dir


@dataclass(frozen=True)
class InferenceSite:
    """Where a rank's inference runs: its place among the ranks, its device and precision,
    and the store it reads what it lacks from (None: the contract's partition directory)."""

    rank: int
    world_size: int
    device: torch.device
    bf16: bool
    partition_dir: Path | None = None


def store_inference(site: InferenceSite) -> tuple[LayerwiseInference, SplitRows]:
    """The inference engine of this rank over a homogeneous store, and the store's labels and
    split masks."""
    rank, world_size, device, bf16 = site.rank, site.world_size, site.device, site.bf16
    store = PartitionStore.open(store_dir(site.partition_dir))
    rows = StoreRows(store)
    engine = LayerwiseInference.of_store(
        store, rows=rows, rank=rank, world_size=world_size, device=device, bf16=bf16
    )
    return engine, rows


def typed_splits(data: HeteroTrainingData) -> SplitRows:
    """The target type's labels and validation and test ids, as a typed trainer holds them."""
    return HeldSplits(data.y, {"val": ids_of(data.val_ids), "test": ids_of(data.test_ids)})


def typed_inference(
    data: HeteroTrainingData,
    tables: Sequence[ShardedEmbedding],
    site: InferenceSite,
) -> LayerwiseInference:
    """The inference engine of a typed trainer's rank (see the module docstring)."""
    device, bf16 = site.device, site.bf16
    store: HeteroPartitionStore | None = None

    def open_store() -> HeteroPartitionStore:
        nonlocal store
        if store is None:
            store = HeteroPartitionStore.open(store_dir(site.partition_dir))
        return store

    csr: dict[EdgeType, tuple[torch.Tensor, torch.Tensor]] = {}
    topology: TypedCSR = csr
    if all(data.in_csr[et][0].numel() == data.node_counts[et[2]] + 1 for et in data.edge_types):
        csr.update(data.in_csr)
    else:
        topology = {et: open_store().topology(et) for et in data.edge_types}
    by_type = {t.node_type: t for t in tables}
    dtype = torch.bfloat16 if bf16 and device.type == "cuda" else torch.float32

    def inputs(node_type: str, lo: int, hi: int) -> torch.Tensor:
        table = by_type.get(node_type)
        if table is not None:
            return table.lookup(torch.arange(lo, hi, dtype=torch.int64, device=device))
        rows = data.x[node_type]
        if rows.shape[0] == data.node_counts[node_type]:
            return rows[lo:hi].to(device, dtype)
        return torch.from_numpy(typed_feature_range(open_store(), node_type, lo, hi)).to(
            device, dtype
        )

    return LayerwiseInference(
        topology,
        data.node_counts,
        inputs,
        rank=site.rank,
        world_size=site.world_size,
        device=device,
        bf16=bf16,
    )
