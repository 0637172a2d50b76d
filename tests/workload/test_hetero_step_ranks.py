"""Two ranks on gloo run the typed fixed-shape step, one of them over caps that its full
batches exceed: those steps run eagerly while the other rank's run on fixed shapes, and both
ranks still all-reduce the same gradients, in step, as plain data-parallel training would.

Each rank trains R-SAGE on its own batches (eagerly on CPU, as a GPU would replay them), with
the flat all-reduce after each step; a plain eager model trained on the mean loss of both
ranks' batches, in this process, is the reference. Every featureless type gets fixed random
features here, so no embedding table is involved.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from distgnn_api.spec import Arch
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.trainer import captured_step
from distgnn_workload.trainer.graph_step import HeteroGraphStep
from tests.support.hetero_step import BATCH, DIM, HeteroParts
from tests.support.ranks import leave_group, spawn_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SIZES = {0: (BATCH, 5, BATCH, 7), 1: (BATCH, BATCH, 9, BATCH)}
"""Seeds per step of each rank: rank 0's full batches go over its caps."""
LR = 0.01


def _inputs(parts: HeteroParts) -> dict[str, Tensor]:
    """Features of every node type: the graph's, and fixed random rows for the others."""
    g = torch.Generator().manual_seed(11)
    x = dict(parts.features)
    for t in parts.graph.featureless_types:
        x[t] = torch.randn(parts.graph.node_counts[t], DIM, generator=g)
    return x


def _batches(parts: HeteroParts, rank: int) -> list[HeteroMiniBatch]:
    """The rank's batches, the same wherever they are drawn."""
    train = torch.from_numpy(parts.graph.train_mask).nonzero().flatten()
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(rank))]
    parts.sampler.reseed(100 + rank)
    x = _inputs(parts)
    out, at = [], 0
    for size in SIZES[rank]:
        hop = parts.sampler.sample(order[at : at + size])
        at += size
        batch = HeteroMiniBatch(
            hop=hop, x={t: v[hop.node_ids[t]] for t, v in x.items()}, y=parts.labels[hop.seed_ids]
        )
        out.append(batch)
    return out


def _worker(rank: int, store_dir: str, out_dir: str) -> None:
    os.environ[captured_step.ENV_OVERLAP] = "0"  # one flat all-reduce after every step
    dist.init_process_group(
        "gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=2
    )
    parts = HeteroParts(Arch.rsage, torch.device("cpu"), static_shapes=False)
    # rank 0: caps fitted to batches of a quarter of the capacity, which full batches exceed
    caps = parts.fitted_caps(BATCH // 4, headroom=1.2) if rank == 0 else parts.caps
    model = parts.model
    step = HeteroGraphStep(
        model,
        torch.optim.Adam(model.parameters(), lr=LR),
        caps,
        parts.graph.edge_types,
        features={t: (v.size(1), v.dtype) for t, v in _inputs(parts).items()},
        tables=[],
        sparse=None,
        device=torch.device("cpu"),
        bf16=False,
        world_size=2,
        capture=False,
    )
    assert step.buckets is None
    losses = [float(step.step(batch)) for batch in _batches(parts, rank)]
    torch.save(
        {
            "params": [p.detach().clone() for p in model.parameters()],
            "losses": losses,
            "oversize": step.oversize,
        },
        f"{out_dir}/rank{rank}.pt",
    )
    leave_group()


def test_ranks_stay_in_step_when_one_steps_eagerly_over_its_caps(tmp_path: Path) -> None:
    spawn_ranks(_worker, (str(tmp_path), str(tmp_path)), 2)
    got = {r: torch.load(tmp_path / f"rank{r}.pt") for r in range(2)}
    assert got[0]["oversize"] == 2, "rank 0's full batches did not go over its caps"
    assert got[1]["oversize"] == 0
    # the reference: one eager model, the mean loss of both ranks' batches per step
    parts = HeteroParts(Arch.rsage, torch.device("cpu"), static_shapes=False)
    model = parts.model
    initial = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    batches = {r: _batches(parts, r) for r in range(2)}
    for i in range(len(SIZES[0])):
        optimizer.zero_grad(set_to_none=True)
        losses = [F.cross_entropy(model(b.x, b.hop), b.y) for b in (batches[0][i], batches[1][i])]
        for r, loss in enumerate(losses):
            assert float(loss.detach()) == pytest.approx(got[r]["losses"][i], rel=1e-4, abs=1e-5)
        ((losses[0] + losses[1]) / 2).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    names = [name for name, _ in model.named_parameters()]
    for r in range(2):
        for name, mine, want, start in zip(
            names, got[r]["params"], model.parameters(), initial, strict=True
        ):
            torch.testing.assert_close(mine, want.detach(), rtol=1e-4, atol=1e-5, msg=name)
            assert not torch.equal(mine, start), f"{name} did not train"
