"""The fixed-capacity embedding path against the compact one (``embedding_reference``), step
by step, on one rank or on each of two spawned ranks (a module the children import).

Each run trains two featureless types side by side on both paths from the same initial
rows: lookups with repeated ids (every table's at once, one exchange of counts: ``lookup_tables``),
a step where each table is looked up twice, a step where a rank asks for no row of a type, a squared loss, row-sparse Adam or Adagrad; then lookups
without grad, and a resume from the fixed-capacity path's checkpoint. What each rank
records (losses, rows, optimizer state per step) must be equal bit for bit.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from distgnn_workload.embeddings import (
    RowExchange,
    RowOwnership,
    RowSparseAdagrad,
    RowSparseAdam,
    RowSparseOptimizer,
    ShardedEmbedding,
    load_shards,
    lookup_tables,
    save_shards,
)
from distgnn_workload.runtime.host_syncs import HostSyncCounter
from tests.support.embedding_ranks import (
    DIM,
    LR,
    RANKS_OF_PARTITION,
    RESUME_AT,
    SEED,
    SIZES,
    STEPS,
    ids_of,
    partition_book,
    target,
)
from tests.support.embedding_reference import (
    CompactAdagrad,
    CompactAdam,
    CompactTable,
    _CompactOptimizer,
)
from tests.support.ranks import leave_group, spawn_ranks

TWICE_AT = 1
"""The step at which each table is looked up twice before the optimizer steps."""

Record = dict[str, Any]


def ownership(node_type: str, world: int) -> RowOwnership:
    if world == 1:
        return RowOwnership.single(node_type, SIZES[node_type])
    book = partition_book(node_type)
    return RowOwnership.from_partition_book(node_type, book, RANKS_OF_PARTITION, world)


def _loss(lookup_all: Any, names: list[str], step: int, rank: int, world: int) -> Tensor:
    """The squared loss of every table's lookups of ``step``; ``lookup_all(ids)`` looks all
    tables up at once (ids in the order of ``names``)."""
    total = torch.zeros(())
    for part in range(2 if step == TWICE_AT else 1):
        ids = [ids_of(t, step, rank, part, world=world) for t in names]
        for t, i, rows in zip(names, ids, lookup_all(ids), strict=True):
            diff = rows.float().cpu() - target(t)[i]
            total = total + (diff**2).sum() / (i.numel() + 1)
    return total


def _state(tables: list[ShardedEmbedding], rows: dict[str, dict[str, Tensor]]) -> Record:
    return {
        t.node_type: {"weight": t.weight.cpu().clone()}
        | {k: v.cpu().clone() for k, v in rows[t.node_type].items()}
        for t in tables
    }


def _tables(
    rank: int, world: int, device: torch.device, host: Any, out_dtype: torch.dtype, seed: int
) -> list[ShardedEmbedding]:
    exchange = RowExchange(rank, world, device, host_group=host)
    return [
        ShardedEmbedding(ownership(t, world), DIM, exchange, seed=seed, out_dtype=out_dtype)
        for t in SIZES
    ]


def _optimizers(
    kind: str, tables: list[ShardedEmbedding], ref: list[CompactTable]
) -> tuple[RowSparseOptimizer, _CompactOptimizer]:
    if kind == "adam":
        return RowSparseAdam(tables, lr=LR), CompactAdam(ref, lr=LR)
    return RowSparseAdagrad(tables, lr=LR, lr_decay=0.01), CompactAdagrad(ref, LR, 0.01)


PADDING = 37
"""Slots of a padded lookup past the table's rows (the capacity every rank shares)."""


def padded_lookups(tables: list[ShardedEmbedding], ids: list[Tensor]) -> list[Tensor]:
    """``lookup_tables(tables, ids)`` as a captured step looks up: each table's ids followed
    by stale ones (some out of range) in a buffer of a capacity every rank shares,
    ``lookup_padded`` with the real number, cut back."""
    out = []
    for table, i in zip(tables, ids, strict=True):
        g = torch.Generator().manual_seed(i.numel())
        size = table.num_rows + PADDING - i.numel()
        stale = torch.randint(-3, table.num_rows + 3, (size,), generator=g)
        rows = table.lookup_padded(torch.cat([i, stale]), torch.tensor(i.numel()))
        out.append(rows[: i.numel()])
    return out


def _step(
    step: int,
    rank: int,
    tables: list[ShardedEmbedding],
    opt: RowSparseOptimizer,
    padded: bool = False,
) -> Tensor:
    names = [t.node_type for t in tables]
    world = tables[0].exchange.world_size
    lookup = padded_lookups if padded else lookup_tables
    loss = _loss(lambda ids: lookup(tables, ids), names, step, rank, world)
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    return loss.detach()


def compare_paths(
    rank: int,
    world: int,
    device: torch.device,
    host: Any,
    run_dir: Path,
    kind: str,
    bf16: bool,
    padded: bool = False,
) -> Record:
    """Train both paths side by side; per step the losses and states of each. ``padded``:
    the fixed-capacity path looks up as a captured step does (:func:`padded_lookups`)."""
    out_dtype = torch.bfloat16 if bf16 else torch.float32
    fixed = _tables(rank, world, device, host, out_dtype, SEED)
    compact = [CompactTable(t) for t in _tables(rank, world, device, host, out_dtype, SEED)]
    opt, ref_opt = _optimizers(kind, fixed, compact)
    fixed_rows = {t.node_type: opt.state[t.node_type].rows for t in fixed}
    record: Record = {"steps": []}
    names = [c.table.node_type for c in compact]

    def ref_lookup(ids: list[Tensor]) -> list[Tensor]:
        return [c.lookup(i) for c, i in zip(compact, ids, strict=True)]

    for step in range(STEPS):
        loss = _step(step, rank, fixed, opt, padded)
        ref_loss = _loss(ref_lookup, names, step, rank, world)
        ref_loss.backward()  # type: ignore[no-untyped-call]
        ref_opt.step()
        record["steps"].append(
            {
                "loss": (loss, ref_loss.detach()),
                "fixed": _state(fixed, fixed_rows),
                "compact": _state([c.table for c in compact], ref_opt.rows),
                "step": (
                    {t.node_type: opt.state[t.node_type].step for t in fixed},
                    dict(ref_opt.steps),
                ),
            }
        )
        if step + 1 == RESUME_AT:
            save_shards(run_dir, RESUME_AT, fixed, opt)
    with torch.no_grad():
        everything = {t: torch.arange(SIZES[t]).flip(0).repeat(2) for t in SIZES}
        record["no_grad"] = [
            (f.lookup(everything[f.node_type]).cpu(), c.lookup(everything[f.node_type]).cpu())
            for f, c in zip(fixed, compact, strict=True)
        ]
        # by construction: the read-backs of looking every table up at once, and one by one
        with HostSyncCounter() as batched:
            lookup_tables(fixed, [everything[t.node_type] for t in fixed])
        with HostSyncCounter() as separate:
            for t in fixed:
                t.lookup(everything[t.node_type])
        record["read_backs"] = (batched.count, separate.count)
    if world > 1:
        dist.barrier(group=host)
    resumed = _tables(rank, world, device, host, out_dtype, SEED + 1)
    resumed_opt, _ = _optimizers(kind, resumed, [])
    load_shards(run_dir, RESUME_AT, resumed, resumed_opt)
    for step in range(RESUME_AT, STEPS):
        _step(step, rank, resumed, resumed_opt, padded)
    record["resumed"] = _state(
        resumed, {t.node_type: resumed_opt.state[t.node_type].rows for t in resumed}
    )
    record["stats"] = [fixed[0].stats.as_dict(), [t.rows_looked_up for t in fixed]]
    return record


def check_equal(record: Record) -> None:
    """Bit-equal losses, rows, optimizer state and step counts at every step; the resumed
    run ends where the straight one did; lookups without grad agree."""
    trained = False
    for i, s in enumerate(record["steps"]):
        a, b = s["loss"]
        assert torch.equal(a, b), (i, a, b)
        assert s["step"][0] == s["step"][1], (i, s["step"])
        for t in SIZES:
            for key, value in s["fixed"][t].items():
                assert torch.equal(value, s["compact"][t][key]), (i, t, key)
        trained = trained or any(
            not torch.equal(s["fixed"][t]["weight"], record["steps"][0]["fixed"][t]["weight"])
            for t in SIZES
        )
    assert trained, "nothing was trained"
    last = record["steps"][-1]["fixed"]
    for t in SIZES:
        for key, value in last[t].items():
            assert torch.equal(record["resumed"][t][key], value), ("resumed", t, key)
    for got, want in record["no_grad"]:
        assert torch.equal(got, want)


# ---------------------------------------------------------------------- two ranks


def _worker(rank: int, tmp: str, kind: str, bf16: bool, padded: bool) -> None:
    timeout = timedelta(seconds=60)
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=2, timeout=timeout
    )
    host = dist.new_group(backend="gloo", timeout=timeout)
    run = Path(tmp) / "run"
    record = compare_paths(rank, 2, torch.device("cpu"), host, run, kind, bf16, padded)
    torch.save(record, f"{tmp}/rank{rank}.pt")
    leave_group()


def run_two_ranks(tmp: Path, kind: str, bf16: bool, padded: bool = False) -> list[Record]:
    tmp.mkdir(parents=True, exist_ok=True)
    spawn_ranks(_worker, (str(tmp), kind, bf16, padded), 2)
    return [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in range(2)]
