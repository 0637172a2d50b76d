"""Ranks of a typed job's feature exchange as real processes (gloo on CPU, NCCL on GPUs).

Two featured node types, each owned by the ranks through an owner map in no id order, as a
typed store's are: every rank holds its own rows of both plus a hot cache of some of the
others, and gathers through :class:`TypedFeatureSource` over one exchange per type. A
training phase has as many batches on every rank; an evaluation phase's counts differ by
rank (rank 0 has none), so a rank that is done ends both types' phases while its peers
still need rounds of both. Every row a rank receives must equal the reference. With
``lost``, that rank starts its evaluation's first rounds of both types and dies: the others
must fail (exit 3, the error saved), not wait for it.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.runtime.features.exchange import FeatureExchange
from distgnn_workload.runtime.features.remote import TypedFeatureSource
from distgnn_workload.runtime.features.table import FeatureTable
from tests.support.ranks import join_group, leave_group, run_rank_processes

CPU = torch.device("cpu")
TYPES = {"author": (240, 5), "paper": (180, 3)}
"""Featured node types: (nodes, features)."""
BATCH = 24
JOIN_S = 120.0


def owners(world: int) -> dict[str, Tensor]:
    """The owning rank of every node of each type: shuffled, the same on every rank. The
    last rank owns no paper (a small type need not reach every partition)."""
    gen = torch.Generator().manual_seed(world)
    return {
        t: torch.randint(0, world - (t == "paper"), (n,), generator=gen)
        for t, (n, _) in TYPES.items()
    }


def reference(node_type: str) -> Tensor:
    """Every row of ``node_type``: row v is v + 0.25 f in column f, a distinct value per type."""
    n, f = TYPES[node_type]
    offset = 1000.0 * list(TYPES).index(node_type)
    return offset + torch.arange(n, dtype=torch.float32)[:, None] + 0.25 * torch.arange(f)


def _tables(rank: int, world: int, device: torch.device) -> dict[str, FeatureTable]:
    tables = {}
    for t, owner in owners(world).items():
        rows = reference(t)
        mine = torch.nonzero(owner == rank).flatten()
        table = FeatureTable(
            rows[mine], mine, rows.shape[0], device, node_type=t, owner=owner, partition=rank,
            capacity=rows.shape[0],
        )  # fmt: skip
        # a hot cache of a different size on every rank, none on rank 1
        remote = torch.nonzero(owner != rank).flatten()
        hot = remote[torch.randperm(remote.numel(), generator=torch.Generator().manual_seed(rank))]
        hot = hot[: 0 if rank == 1 else 10 * (rank + 1)].sort().values
        table.add_cached(hot, rows[hot])
        table.place(None)
        tables[t] = table
    return tables


def _rank(rank: int, world: int, out: str, cuda: bool, lost: int) -> None:
    """One trainer (on GPU ``rank`` with ``cuda``: NCCL, the types' exchanges side by side
    on communicators and streams of their own); ``lost`` >= 0: that rank dies in its
    evaluation, after starting its first rounds."""
    torch.set_num_threads(1)
    device = join_group(
        rank, world, f"file://{out}/store", cuda=cuda, timeout=timedelta(seconds=60)
    )
    tables = _tables(rank, world, device)
    source = TypedFeatureSource(tables)  # no fetch: a row not at hand must come by exchange
    # one exchange per type, made in the same order on every rank
    ranks = list(range(world))
    source.use({t: FeatureExchange.on_new_group(tb, None, ranks, 60.0) for t, tb in tables.items()})
    gen = torch.Generator().manual_seed(100 + rank)
    results: dict[str, Any] = {
        "exchanges": sum(s.exchange is not None for s in source.sources.values())
    }
    try:
        for phase, count in (("train", 3), ("eval", 2 * rank + (rank == lost))):
            got = {"batches": 0, "rows": 0, "wrong": 0}
            for _ in range(count):
                ids = {
                    t: torch.randint(0, n, (BATCH,), generator=gen) for t, (n, _) in TYPES.items()
                }
                started = {t: source.start(t, i) for t, i in ids.items()}  # both on their way
                if rank == lost and phase == "eval":
                    sys.stdout.flush()
                    os._exit(17)  # its rounds started, then gone without a word
                for t, gathering in started.items():
                    rows = gathering.wait().cpu()
                    got["rows"] += rows.shape[0]
                    got["wrong"] += int((rows != reference(t)[ids[t]]).any(dim=1).sum())
                got["batches"] += 1
            source.finish_phase()
            results[phase] = got
    except Exception as err:  # the lost-rank case: what failed, and that it did
        results["error"] = f"{type(err).__name__}: {err}"
        torch.save(results, Path(out) / f"rank{rank}.pt")
        sys.stdout.flush()
        os._exit(3)
    results["stats"] = {t: vars(s) for t, s in source.take().items()}
    results["rounds"] = {
        t: s.exchange.moved.rounds for t, s in source.sources.items() if s.exchange
    }
    torch.save(results, Path(out) / f"rank{rank}.pt")
    leave_group()


def spawn_ranks(world: int, out: Path, *, cuda: bool = False, lost: int = -1) -> list[int | None]:
    """Run :func:`_rank` in ``world`` processes; their exit codes (None: still running)."""
    return run_rank_processes(_rank, lambda r: (r, world, str(out), cuda, lost), world, JOIN_S)
