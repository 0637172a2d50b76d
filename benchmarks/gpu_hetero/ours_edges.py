"""Sampled edges per seed, per edge type, of distgnn's typed sampler on the benchmark's store.

The trainers report sampled edges summed over edge types (``training_stats.json``); the
per-edge-type figures that compare with PyG's come from the same sampler the trainers use
(:class:`HeteroNeighborSampler`, on the device, at the resolved fanouts), run here over the
store's training seeds of the target type in shuffled batches of the training batch size.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_workload.partition import HeteroPartitionStore
from distgnn_workload.runtime.training_data import from_store
from distgnn_workload.sampling import SampledEdgesPerSeed
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler


def sampled_edges_per_seed(
    store_dir: Path,
    *,
    fanout: list[int],
    batch_size: int,
    device: torch.device,
    max_batches: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``hetero_edges_per_seed`` record of our sampler (``max_batches`` 0: every
    training seed once)."""
    t0 = time.perf_counter()
    data = from_store(HeteroPartitionStore.open(store_dir))
    fanouts = resolve_edge_fanouts(fanout, None, data.edge_types)
    sampler = HeteroNeighborSampler(
        {et: data.in_csr[et] for et in data.edge_types},
        data.node_counts,
        fanouts,
        seed_type=data.target_node_type,
        device=device,
        seed=seed,
    )
    load_s = time.perf_counter() - t0
    train = torch.cat(data.train_ids)
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(seed))]
    batches = list(order.split(batch_size))
    if max_batches > 0:
        batches = batches[:max_batches]
    sampler.prepare(batch_size)
    counts = SampledEdgesPerSeed()
    t1 = time.perf_counter()
    for seeds in batches:
        counts.add_batch(sampler.sample(seeds.to(device)))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {
        "bench": "hetero_edges_per_seed",
        "sampler": "distgnn",
        "batches": len(batches),
        "seeds": counts.seeds,
        "batch_size": batch_size,
        "fanout": fanout,
        "edges_per_seed": counts.per_seed(),
        "edges_per_seed_total": counts.total_per_seed(),
        "load_s": round(load_s, 2),
        "sample_s": round(time.perf_counter() - t1, 2),
    }
