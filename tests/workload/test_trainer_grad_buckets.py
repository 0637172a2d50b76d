"""Bucketed all-reduce during the backward trains exactly like the flat all-reduce after it.

Two real processes on gloo run the fixed-shape step (eagerly on CPU, as the CUDA graph
would replay it) on different batches, once with gradient buckets and once with the flat
all-reduce; both must end with the same parameters, on both ranks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import NeighborSampler, StaticLayout, csc_from_edge_index, pad_hops
from distgnn_workload.trainer import captured_step, grad_buckets
from distgnn_workload.trainer.graph_step import GraphStep
from tests.support.ranks import leave_group, spawn_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FANOUTS = [4, 3]


def _train(rank: int, overlap: bool) -> list[torch.Tensor]:
    os.environ[captured_step.ENV_OVERLAP] = "hooks" if overlap else "0"
    grad_buckets.BUCKET_BYTES = 256  # several buckets even for this small model
    g = torch.Generator().manual_seed(0)
    n = 300
    edge_index = torch.randint(0, n, (2, 2400), generator=g)
    indptr, indices = csc_from_edge_index(edge_index, n)
    features = torch.randn(n, 8, generator=g)
    labels = torch.randint(0, 3, (n,), generator=g)
    sampler = NeighborSampler(indptr, indices, FANOUTS, device="cpu", seed=rank)
    torch.manual_seed(0)
    model = GraphSAGE(8, 16, 3, 2, dropout=0.0)
    layout = StaticLayout(16, tuple(FANOUTS))
    step = GraphStep(
        model,
        torch.optim.Adam(model.parameters(), lr=0.01),
        layout,
        num_features=8,
        input_dtype=torch.float32,
        device=torch.device("cpu"),
        bf16=False,
        world_size=2,
        capture=False,
    )
    assert (step.buckets is not None) == overlap
    if step.buckets is not None:
        assert step.buckets.num_buckets > 1
    from distgnn_workload.loader import MiniBatch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(rank + 1))
    for i in range(5):
        hop = sampler.sample(order[i * 16 : (i + 1) * 16])
        batch = MiniBatch(hop=hop, x=features[hop.node_ids], y=labels[hop.seed_ids])
        batch.static = pad_hops(hop, layout)
        step.step(batch)
    return [p.detach().clone() for p in model.parameters()]


def _worker(rank: int, store_dir: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=2
    )
    for overlap in (True, False):
        params = _train(rank, overlap)
        torch.save(params, f"{out_dir}/rank{rank}-{int(overlap)}.pt")
    leave_group()


def test_bucketed_all_reduce_matches_the_flat_all_reduce(tmp_path: Path) -> None:
    spawn_ranks(_worker, (str(tmp_path), str(tmp_path)), 2)
    result = {(r, o): torch.load(tmp_path / f"rank{r}-{o}.pt") for r in range(2) for o in range(2)}
    torch.manual_seed(0)
    initial = [p.detach() for p in GraphSAGE(8, 16, 3, 2, dropout=0.0).parameters()]
    for r in range(2):
        for a, b in zip(result[(r, 1)], result[(r, 0)], strict=True):
            assert torch.allclose(a, b, atol=1e-6), "buckets and flat all-reduce disagree"
        for a, b in zip(result[(0, 1)], result[(1, 1)], strict=True):
            assert torch.equal(a, b), "the ranks' parameters diverged"
    assert any(not torch.allclose(a, b) for a, b in zip(initial, result[(0, 1)], strict=True))
