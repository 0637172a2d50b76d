"""Which trainer rank owns each row of a node type's embedding table.

A node type's rows are its type-local node ids ``0 .. num_rows-1``. Ownership is an array
``owner[row] -> rank``; a rank's shard holds its rows in increasing id order, so a row's place
in its owner's shard (``local[row]``) follows from the array alone and every rank computes
every other rank's layout without communication.

:meth:`RowOwnership.from_partition_book` turns the partition store's book (typed node ->
partition) and the ranks that serve each partition (``seeds.holder_ranks``) into ownership:
a partition's rows are cut into contiguous blocks, one per rank of that partition.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor


class OwnershipError(ValueError):
    """An ownership that cannot work; the message names the node type and the fix."""


class RowOwnership:
    """``owner[row] -> rank`` for the rows of one node type, over ``world_size`` ranks."""

    def __init__(self, node_type: str, owner: npt.ArrayLike | Tensor, world_size: int) -> None:
        owners = torch.as_tensor(np.asarray(owner) if not isinstance(owner, Tensor) else owner)
        if owners.dim() != 1:
            raise OwnershipError(
                f"node type {node_type!r}: the owner array must be 1-D (one rank per node), "
                f"got shape {tuple(owners.shape)}"
            )
        if owners.dtype.is_floating_point or owners.dtype == torch.bool:
            raise OwnershipError(
                f"node type {node_type!r}: the owner array must hold integer ranks, "
                f"got {owners.dtype}"
            )
        if world_size < 1:
            raise OwnershipError(f"node type {node_type!r}: world_size must be >= 1")
        owners = owners.to(torch.int64).cpu()
        if owners.numel() and (int(owners.min()) < 0 or int(owners.max()) >= world_size):
            bad = int(((owners < 0) | (owners >= world_size)).nonzero()[0, 0])
            raise OwnershipError(
                f"node type {node_type!r}: node {bad} is owned by rank {int(owners[bad])}, "
                f"outside 0..{world_size - 1}; give every node a rank of the trainers' group"
            )
        self.node_type = node_type
        self.world_size = world_size
        self.owner = owners
        counts = torch.bincount(owners, minlength=world_size)
        self.shard_sizes: list[int] = [int(c) for c in counts.tolist()]
        # local[row] = the row's place in its owner's shard (rows kept in id order)
        order = torch.argsort(owners, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        local = torch.empty_like(owners)
        local[order] = torch.arange(owners.numel()) - torch.repeat_interleave(starts, counts)
        self.local = local

    @property
    def num_rows(self) -> int:
        return int(self.owner.numel())

    def rows_of(self, rank: int) -> Tensor:
        """The type-local ids that ``rank`` owns, in shard order."""
        return (self.owner == rank).nonzero().flatten()

    def digest(self) -> str:
        """A fingerprint of the ownership (checkpoints refuse a shard of another layout)."""
        h = hashlib.sha256(f"{self.node_type}:{self.world_size}:".encode())
        h.update(self.owner.numpy().astype("<i8").tobytes())
        return h.hexdigest()[:16]

    @classmethod
    def single(cls, node_type: str, num_rows: int) -> RowOwnership:
        """Every row on rank 0: a job with one trainer."""
        return cls(node_type, torch.zeros(num_rows, dtype=torch.int64), 1)

    @classmethod
    def contiguous(cls, node_type: str, num_rows: int, world_size: int) -> RowOwnership:
        """Rows cut into ``world_size`` contiguous, near-equal blocks."""
        owner = torch.arange(num_rows, dtype=torch.int64) * world_size // max(num_rows, 1)
        return cls(node_type, owner, world_size)

    @classmethod
    def from_partition_book(
        cls,
        node_type: str,
        book: npt.ArrayLike | Tensor,
        ranks_of_partition: Sequence[Sequence[int]],
        world_size: int,
    ) -> RowOwnership:
        """Ownership from a partition book (``book[row] -> partition``).

        ``ranks_of_partition[p]`` are the trainer ranks that serve partition ``p``: in worker
        mode the processes of the trainer pod that holds it, in server-client mode the
        trainers that draw seeds from its sampler (``seeds.holder_ranks`` gives both). The
        rows of partition ``p`` are cut into contiguous blocks, one per rank listed.
        """
        parts = torch.as_tensor(np.asarray(book) if not isinstance(book, Tensor) else book)
        parts = parts.to(torch.int64).flatten().cpu()
        if parts.numel() and (int(parts.min()) < 0 or int(parts.max()) >= len(ranks_of_partition)):
            bad = int(((parts < 0) | (parts >= len(ranks_of_partition))).nonzero()[0, 0])
            raise OwnershipError(
                f"node type {node_type!r}: the partition book puts node {bad} in partition "
                f"{int(parts[bad])} but ranks are given for {len(ranks_of_partition)} "
                "partitions; pass one list of ranks per partition of the store"
            )
        owner = torch.empty_like(parts)
        for p, ranks in enumerate(ranks_of_partition):
            rows = (parts == p).nonzero().flatten()
            if rows.numel() == 0:
                continue
            if not ranks:
                raise OwnershipError(
                    f"node type {node_type!r}: partition {p} has {rows.numel()} nodes but no "
                    "rank serves it; give every partition at least one trainer rank"
                )
            block = torch.arange(rows.numel()) * len(ranks) // rows.numel()
            owner[rows] = torch.as_tensor(list(ranks), dtype=torch.int64)[block]
        return cls(node_type, owner, world_size)
