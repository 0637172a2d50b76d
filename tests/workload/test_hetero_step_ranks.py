"""Two ranks on gloo run the typed fixed-shape step, as plain data-parallel training would.

Each rank trains R-SAGE on its own batches (eagerly on CPU, as a GPU would replay them), with
the flat all-reduce after each step; a plain eager model trained on the mean loss of both
ranks' batches, in this process, is the reference.

- Without embeddings (every featureless type gets fixed random features), one rank's caps
  are below its full batches: those steps run eagerly while the other rank's run on fixed
  shapes, and both ranks still all-reduce the same gradients, in step.
- With embedding tables sharded over both ranks, the step looks them up and updates them
  itself (padded blocks between the ranks, no counts); in a step where one rank's batch is
  over the caps both ranks step eagerly with counted lookups. The reference trains one
  unsharded table per type with the same row-sparse Adam. Again with blocks smaller than the
  buffers, fitted to the steps' nodes per owner but one short for one type: the batch that
  holds more of one owner's nodes steps eagerly on both ranks, the others replay with the
  small blocks, and a lookup past a full block is an error.
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
from distgnn_workload.embeddings import RowExchange, RowOwnership, RowSparseAdam, ShardedEmbedding
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


EMBEDDED_SIZES = {0: (BATCH // 3, BATCH, 7, BATCH // 3), 1: (BATCH // 3, 9, BATCH // 3, 5)}
"""Seeds per step with embeddings: at step 1 rank 0's batch is over the caps."""


def _embedded_batches(parts: HeteroParts, rank: int) -> list[HeteroMiniBatch]:
    """The rank's batches with the graph's features only (tables for the other types)."""
    train = torch.from_numpy(parts.graph.train_mask).nonzero().flatten()
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(rank))]
    parts.sampler.reseed(200 + rank)
    out, at = [], 0
    for size in EMBEDDED_SIZES[rank]:
        out.append(parts.batch(order[at : at + size]))
        at += size
    return out


def _sharded_tables(parts: HeteroParts, rank: int) -> list[ShardedEmbedding]:
    exchange = RowExchange(rank, 2, torch.device("cpu"))
    return [
        ShardedEmbedding(
            RowOwnership.contiguous(t, parts.graph.node_counts[t], 2), DIM, exchange, seed=5
        )
        for t in parts.graph.featureless_types
    ]


def _owner_counts(batch: HeteroMiniBatch, tables: list[ShardedEmbedding]) -> dict[str, list[int]]:
    """What the pipeline counts for a batch: its nodes of each table's type per owner."""
    return {t.node_type: t.owner_counts(batch.hop.node_ids[t.node_type]).tolist() for t in tables}


def _embedded_worker(rank: int, store_dir: str, out_dir: str, fitted: bool) -> None:
    os.environ[captured_step.ENV_OVERLAP] = "0"
    dist.init_process_group(
        "gloo", init_method=f"file://{store_dir}/store", rank=rank, world_size=2
    )
    parts = HeteroParts(Arch.rsage, torch.device("cpu"), static_shapes=False)
    caps = parts.fitted_caps(BATCH // 2, headroom=1.3)  # the same on both ranks
    model = parts.model
    tables = _sharded_tables(parts, rank)
    batches = _embedded_batches(parts, rank)
    blocks = None
    if fitted:  # blocks fitted to the steps within the caps of both ranks (each draws both),
        # the first type's one short of its largest count: the step that holds it goes eager
        both = [b for r in range(2) for i, b in enumerate(_embedded_batches(parts, r)) if i != 1]
        seen = [_owner_counts(b, tables) for b in both]
        blocks = {t.node_type: max(max(c[t.node_type]) for c in seen) for t in tables}
        blocks[tables[0].node_type] -= 1
        for batch in batches:
            batch.owner_counts = _owner_counts(batch, tables)
    step = HeteroGraphStep(
        model,
        torch.optim.Adam(model.parameters(), lr=LR),
        caps,
        parts.graph.edge_types,
        features={t: (v.size(1), v.dtype) for t, v in parts.features.items()},
        tables=tables,
        sparse=RowSparseAdam(tables, lr=LR),
        blocks=blocks,
        device=torch.device("cpu"),
        bf16=False,
        world_size=2,
        capture=False,
    )
    losses = [float(step.step(batch)) for batch in batches]
    over = ""
    if fitted:  # a lookup that asks one owner for more ids than its block holds
        with torch.no_grad():
            tables[0].lookup_padded(torch.arange(4), torch.tensor(4), 2)
        try:
            tables[0].check_lookups()
        except RuntimeError as err:
            over = str(err)
    torch.save(
        {
            "params": [p.detach().clone() for p in model.parameters()],
            "losses": losses,
            "oversize": step.oversize,
            "rows": {t.node_type: (t.rows.clone(), t.weight.clone()) for t in tables},
            "remote": tables[0].take_counts()[1],
            "blocks": dict(step.blocks),
            "buffers": {t.node_type: step.hops.node_cap(t.node_type) for t in tables},
            "over": over,
        },
        f"{out_dir}/rank{rank}.pt",
    )
    leave_group()


@pytest.mark.parametrize("fitted", [False, True], ids=["buffer-blocks", "fitted-blocks"])
def test_two_ranks_train_sharded_embeddings_inside_the_step_as_one_model(
    tmp_path: Path, fitted: bool
) -> None:
    spawn_ranks(_embedded_worker, (str(tmp_path), str(tmp_path), fitted), 2)
    got = {r: torch.load(tmp_path / f"rank{r}.pt") for r in range(2)}
    # step 1: rank 0's batch is over the caps, so both ranks stepped eagerly
    oversize = [got[r]["oversize"] for r in range(2)]
    if not fitted:
        assert oversize == [1, 1]
        assert got[0]["blocks"] == {}
    else:  # and the step(s) with the most of one owner's nodes of the first type
        assert oversize[0] == oversize[1], oversize
        assert oversize[0] in (2, 3), oversize
        blocks, buffers = got[0]["blocks"], got[0]["buffers"]
        assert blocks == got[1]["blocks"]
        assert blocks.keys() == buffers.keys()
        assert all(blocks[t] < buffers[t] for t in blocks), (blocks, buffers)
        for r in range(2):
            assert "did not fit their owner's block" in got[r]["over"], got[r]["over"]
    assert got[0]["remote"] > 0, "no embedding row came from the other rank"
    parts = HeteroParts(Arch.rsage, torch.device("cpu"), static_shapes=False)
    model = parts.model
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    tables = parts.new_tables()
    sparse = RowSparseAdam(tables, lr=LR)
    batches = {r: _embedded_batches(parts, r) for r in range(2)}
    initial = {t.node_type: t.weight.clone() for t in tables}
    for i in range(len(EMBEDDED_SIZES[0])):
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for r in range(2):
            b = batches[r][i]
            x = dict(b.x)
            for table in tables:
                x[table.node_type] = table.lookup(b.hop.node_ids[table.node_type])
            losses.append(F.cross_entropy(model(x, b.hop), b.y))
            assert float(losses[r].detach()) == pytest.approx(
                got[r]["losses"][i], rel=1e-4, abs=1e-5
            ), (r, i)
        ((losses[0] + losses[1]) / 2).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        sparse.step()
    for r in range(2):
        for mine, want in zip(got[r]["params"], model.parameters(), strict=True):
            torch.testing.assert_close(mine, want.detach(), rtol=1e-4, atol=1e-5)
        for table in tables:
            rows, weight = got[r]["rows"][table.node_type]
            torch.testing.assert_close(weight, table.weight[rows], rtol=1e-4, atol=1e-5)
    for table in tables:
        assert not torch.equal(table.weight, initial[table.node_type]), table.node_type
