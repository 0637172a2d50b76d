"""Embedding shards and their optimizer state in the run's checkpoints.

The model's checkpoint is one file that trainer rank 0 writes
(:mod:`distgnn_workload.runtime.checkpoint`); an embedding table is spread over every rank,
so each rank writes its own shards next to it, with the same atomic write::

    <run>/checkpoints/
    ├── latest.json                  # points at epoch-<n>.pt: the commit point
    ├── epoch-<n>.pt                 # rank 0: model, dense optimizer, history
    └── embeddings/
        └── epoch-<n>/
            ├── rank-0-of-2.pt       # rank 0's rows of every table + their optimizer state
            └── rank-1-of-2.pt

Order of a save: every rank calls :func:`save_shards`, then the trainers' barrier
(``Collectives.barrier``), then rank 0 ``save_checkpoint``, which moves ``latest.json``.
A crash before ``latest.json`` moves leaves the previous epoch whole. On resume, every rank
takes the epoch of ``load_latest`` and calls :func:`load_shards` for it. Shards are kept for
one epoch more than the model's files, so that the older checkpoint ``load_latest`` falls
back to when the newest is torn still has its shards.

A shard holds the node type's layout (world size, rank, a digest of the ownership). A job
of the same layout reads its own file; a job of another layout (more or fewer trainers,
other partitions) has every rank read all of the epoch's shards and keep its rows, with
their optimizer state.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from distgnn_workload.embeddings.exchange import host_copy
from distgnn_workload.embeddings.optim import RowSparseOptimizer
from distgnn_workload.embeddings.table import ShardedEmbedding
from distgnn_workload.runtime.checkpoint import (
    KEEP_CHECKPOINTS,
    CheckpointError,
    checkpoint_dir,
    save_atomically,
)

EMBEDDINGS_DIR = "embeddings"
_EPOCH = re.compile(r"^epoch-(\d+)$")
_SHARD = re.compile(r"^rank-(\d+)-of-(\d+)\.pt$")


def shard_path(run_dir: str | Path, epoch: int, rank: int, world_size: int) -> Path:
    return (
        checkpoint_dir(run_dir)
        / EMBEDDINGS_DIR
        / f"epoch-{epoch}"
        / f"rank-{rank}-of-{world_size}.pt"
    )


def _layout(tables: Sequence[ShardedEmbedding]) -> tuple[int, int]:
    if not tables:
        raise ValueError("no embedding tables to checkpoint")
    ranks = {(t.rank, t.exchange.world_size) for t in tables}
    if len(ranks) != 1:
        raise ValueError(f"the tables disagree on rank and world size: {sorted(ranks)}")
    return ranks.pop()


def save_shards(
    run_dir: str | Path,
    epoch: int,
    tables: Sequence[ShardedEmbedding],
    optimizer: RowSparseOptimizer,
    *,
    keep: int = KEEP_CHECKPOINTS + 1,
) -> Path:
    """Write this rank's shards after ``epoch`` epochs; drop its shards of older epochs
    beyond the newest ``keep``."""
    rank, world = _layout(tables)
    path = shard_path(run_dir, epoch, rank, world)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_atomically(
        path,
        {
            "epoch": epoch,
            "rank": rank,
            "world_size": world,
            "tables": {t.node_type: shard_state(t) for t in tables},
            "optimizer": optimizer.state_dict(),
        },
    )
    root = path.parent.parent
    epochs = sorted(
        (int(m.group(1)) for p in root.iterdir() if (m := _EPOCH.match(p.name))), reverse=True
    )
    for old in epochs[keep:]:
        stale = shard_path(run_dir, old, rank, world)
        stale.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the last rank to leave removes the folder
            stale.parent.rmdir()
    return path


def load_shards(
    run_dir: str | Path,
    epoch: int,
    tables: Sequence[ShardedEmbedding],
    optimizer: RowSparseOptimizer,
) -> Path:
    """Load this rank's shards and optimizer state of ``epoch`` (the model checkpoint's).

    When the shards were written by another layout (another number of trainers, another
    partitioning), every rank reads all of that epoch's shards and takes its own rows.
    Returns the file read, or the folder when resharded.
    """
    rank, world = _layout(tables)
    path = shard_path(run_dir, epoch, rank, world)
    if path.is_file():
        state = _read(path, epoch)
        _check_types(state, tables, str(path))
        digests = {name: table.get("ownership") for name, table in state["tables"].items()}
        if all(digests[t.node_type] == t.ownership.digest() for t in tables):
            _apply(state, tables, optimizer, str(path))
            return path
    _apply(_reshard(path.parent, epoch, tables), tables, optimizer, str(path.parent))
    return path.parent


def _read(path: Path, epoch: int) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(f"cannot read embedding shard {path}: {err}") from err
    if not isinstance(state, dict) or state.get("epoch") != epoch:
        raise CheckpointError(f"{path} is not an embedding shard of epoch {epoch}")
    return state


def _check_types(state: dict[str, Any], tables: Sequence[ShardedEmbedding], source: str) -> None:
    saved = sorted(state.get("tables", {}))
    names = sorted(t.node_type for t in tables)
    if saved != names:
        raise CheckpointError(
            f"{source} holds embeddings of {saved}, this job has {names}; the job "
            "changed since it was written: move the run's checkpoints away to start over"
        )


def table_layout(table: ShardedEmbedding) -> dict[str, Any]:
    """What identifies the layout of a rank's shard of ``table``."""
    return {
        "node_type": table.node_type,
        "num_rows": table.num_rows,
        "dim": table.dim,
        "world_size": table.exchange.world_size,
        "rank": table.rank,
        "ownership": table.ownership.digest(),
    }


def shard_state(table: ShardedEmbedding) -> dict[str, Any]:
    """This rank's rows of ``table`` and the layout they belong to (host tensors)."""
    table.check_lookups()
    return {
        **table_layout(table),
        "rows": table.rows.clone(),
        "weight": host_copy(table.weight, f"the embedding rows of {table.node_type!r}"),
    }


def load_shard_state(
    table: ShardedEmbedding, state: dict[str, Any], *, source: str = "the checkpoint"
) -> None:
    """Put the rows of a :func:`shard_state` of the same layout into ``table``."""
    for key, value in table_layout(table).items():
        if state.get(key) != value:
            raise ValueError(
                f"{source}: embedding {table.node_type!r} has {key}={state.get(key)!r} "
                f"but this job has {value!r}; the job changed since it was written"
            )
    weight = state["weight"]
    if tuple(weight.shape) != (table.rows.numel(), table.dim):
        raise ValueError(
            f"{source}: embedding {table.node_type!r} holds {tuple(weight.shape)} rows, "
            f"this rank owns {(table.rows.numel(), table.dim)}"
        )
    table.weight.copy_(weight.to(torch.float32))


def _apply(
    state: dict[str, Any],
    tables: Sequence[ShardedEmbedding],
    optimizer: RowSparseOptimizer,
    source: str,
) -> None:
    try:
        for table in tables:
            load_shard_state(table, state["tables"][table.node_type], source=source)
        optimizer.load_state_dict(state["optimizer"], source=source)
    except (KeyError, ValueError) as err:
        raise CheckpointError(str(err)) from None


def _reshard(folder: Path, epoch: int, tables: Sequence[ShardedEmbedding]) -> dict[str, Any]:
    """This rank's state, gathered from the shards of another layout."""
    sets: dict[int, dict[int, Path]] = {}
    for p in folder.glob("rank-*-of-*.pt") if folder.is_dir() else []:
        if m := _SHARD.match(p.name):
            sets.setdefault(int(m.group(2)), {})[int(m.group(1))] = p
    complete = [w for w, files in sets.items() if set(files) == set(range(w))]
    if not complete:
        found = sorted(p.name for files in sets.values() for p in files.values())
        raise CheckpointError(
            f"{folder} has no complete set of embedding shards for epoch {epoch} (found "
            f"{found or 'none'}); the checkpoint is incomplete: move the run's checkpoints "
            "away to start over"
        )
    world = max(complete)
    states = [_read(sets[world][r], epoch) for r in range(world)]
    for r, st in enumerate(states):
        _check_types(st, tables, str(sets[world][r]))
    kinds = {st["optimizer"]["kind"] for st in states}
    out: dict[str, Any] = {
        "tables": {},
        "optimizer": {"kind": kinds.pop() if len(kinds) == 1 else kinds, "tables": {}},
    }
    for table in tables:
        name = table.node_type
        parts = [st["tables"][name] for st in states]
        if {(p["num_rows"], p["dim"]) for p in parts} != {(table.num_rows, table.dim)}:
            raise CheckpointError(
                f"{folder}: embedding {name!r} was saved with (rows, dim) "
                f"{sorted({(p['num_rows'], p['dim']) for p in parts})}, this job has "
                f"{(table.num_rows, table.dim)}: move the run's checkpoints away to start over"
            )
        ids = torch.cat([p["rows"] for p in parts])
        order = torch.argsort(ids)
        if not torch.equal(ids[order], torch.arange(table.num_rows)):
            raise CheckpointError(f"{folder}: the shards of {name!r} do not hold each row once")
        pick = order[table.rows]  # where each of this rank's rows lies in the saved shards
        opts = [st["optimizer"]["tables"][name] for st in states]
        steps = {int(o["step"]) for o in opts}
        if len(steps) != 1:
            raise CheckpointError(f"{folder}: the shards of {name!r} disagree on the step count")
        out["tables"][name] = {
            **table_layout(table),
            "rows": table.rows.clone(),
            "weight": torch.cat([p["weight"] for p in parts])[pick],
        }
        out["optimizer"]["tables"][name] = {
            "step": steps.pop(),
            "rows": {k: torch.cat([o["rows"][k] for o in opts])[pick] for k in opts[0]["rows"]},
        }
    return out
