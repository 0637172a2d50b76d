"""A heterogeneous trainer's full-neighbourhood inference: its topology, inputs and labels.

The topology and the featured rows come from the trainer's own graph where it holds them
whole (one trainer over a :class:`HeteroGraphData`), else from the typed store on the
shared volume (a worker-mode trainer holds the topology but only some rows; a
server-client trainer holds neither). The featureless types' inputs are the learnt
embeddings' rows, looked up collectively for each rank's share, every table in the same
order on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from distgnn_api.contract import WorkloadEnv
from distgnn_api.edge_types import EdgeType
from distgnn_workload.embeddings import ShardedEmbedding
from distgnn_workload.evaluation.hetero_final import typed_feature_range
from distgnn_workload.evaluation.hetero_inference import HeteroLayerwiseInference, TypedCSR
from distgnn_workload.partition.store import HeteroPartitionStore
from distgnn_workload.runtime.hetero_data import HeteroTrainingData


def typed_inference(
    data: HeteroTrainingData,
    tables: Sequence[ShardedEmbedding],
    *,
    rank: int,
    world_size: int,
    device: torch.device,
    bf16: bool,
    partition_dir: Path | None = None,
) -> HeteroLayerwiseInference:
    """The inference engine of this rank (see the module docstring). The store, when needed,
    is at ``partition_dir``, else the contract's partition directory."""
    store: HeteroPartitionStore | None = None

    def open_store() -> HeteroPartitionStore:
        nonlocal store
        if store is None:
            path = partition_dir or WorkloadEnv.from_environ().partition_dir
            store = HeteroPartitionStore.open(path)
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

    return HeteroLayerwiseInference(
        topology,
        data.node_counts,
        inputs,
        rank=rank,
        world_size=world_size,
        device=device,
        bf16=bf16,
    )
