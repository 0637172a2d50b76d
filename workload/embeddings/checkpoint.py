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

A shard holds the node type's layout (world size, rank, a digest of the ownership) and is
refused by a job whose layout differs: resume with the same trainers and partitions.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path

import torch

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
            "tables": {t.node_type: t.shard_state() for t in tables},
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
    """Load this rank's shards and optimizer state of ``epoch`` (the model checkpoint's)."""
    rank, world = _layout(tables)
    path = shard_path(run_dir, epoch, rank, world)
    if not path.is_file():
        others = (
            sorted(p.name for p in path.parent.glob("rank-*.pt")) if path.parent.is_dir() else []
        )
        raise CheckpointError(
            f"{path} is missing: the checkpoint of epoch {epoch} has no embedding shard for "
            f"rank {rank} of {world} (found {others or 'none'}). Resume with the trainers "
            "that wrote it, or move the run's checkpoints away to start over."
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise CheckpointError(f"cannot read embedding shard {path}: {err}") from err
    if state.get("epoch") != epoch:
        raise CheckpointError(f"{path} holds epoch {state.get('epoch')}, not {epoch}")
    saved = state.get("tables", {})
    names = sorted(t.node_type for t in tables)
    if sorted(saved) != names:
        raise CheckpointError(
            f"{path} holds embeddings of {sorted(saved)}, this job has {names}; the job "
            "changed since it was written: move the run's checkpoints away to start over"
        )
    try:
        for table in tables:
            table.load_shard_state(saved[table.node_type], source=str(path))
        optimizer.load_state_dict(state["optimizer"], source=str(path))
    except (KeyError, ValueError) as err:
        raise CheckpointError(str(err)) from None
    return path
