"""Global id -> batch-local id relabelling through a preallocated table, with no sort.

The table has one slot per global id (plus one padding id) and holds -1 for ids not in the
batch. Each unseen id of a hop gets a marker below -1 through an atomic ``amin`` of its
positions, so its first position wins and new ids are numbered in order of first appearance.
These are the steps of :class:`NeighborSampler`'s relabelling, as functions of a table, so
that the typed sampler runs them on one table per node type.
"""

from __future__ import annotations

import torch
from torch import Tensor

from distgnn_workload.sampling.csr import INT32_MAX


def table_dtype(device: torch.device) -> torch.dtype:
    """int32 for the table where ``scatter_reduce_(amin)`` supports it, else int64."""
    probe = torch.full((2,), -1, dtype=torch.int32, device=device)
    try:
        probe.scatter_reduce_(
            0, torch.zeros(1, dtype=torch.int64, device=device), probe[:1] - 1, reduce="amin"
        )
    except RuntimeError:
        return torch.int64
    return torch.int32


def relabel(table: Tensor, neighbours: Tensor, next_id: int) -> tuple[Tensor, Tensor]:
    """Map ``neighbours`` (global ids) to local ids, numbering unseen ones from ``next_id``.

    Returns (local ids, the new global ids in order of first appearance); two host syncs.
    """
    count = neighbours.numel()
    if count > INT32_MAX - 2:
        raise ValueError(f"a hop of {count} sampled edges is too large for int32 relabelling")
    current = table[neighbours]
    unseen = current < 0
    marker = torch.arange(count, dtype=table.dtype, device=table.device) - (count + 1)
    table.scatter_reduce_(0, neighbours, torch.where(unseen, marker, current), reduce="amin")
    first = unseen & (table[neighbours] == marker)
    new_nodes = neighbours[first]
    table[new_nodes] = torch.arange(
        next_id, next_id + new_nodes.numel(), dtype=table.dtype, device=table.device
    )
    return table[neighbours].to(torch.int64), new_nodes


def relabel_static(
    table: Tensor, neighbours: Tensor, valid: Tensor, next_id: Tensor, pad: int
) -> tuple[Tensor, Tensor]:
    """:func:`relabel` without compaction or host sync: (first appearance mask, rank among new).

    ``next_id`` is a 0-d tensor. Invalid entries point at the padding id ``pad`` and are
    never new; its slot ends up -1 like every other slot of the batch.
    """
    count = neighbours.numel()
    current = table[neighbours]
    unseen = (current < 0) & valid
    marker = torch.arange(count, dtype=table.dtype, device=table.device) - (count + 1)
    table.scatter_reduce_(0, neighbours, torch.where(unseen, marker, current), reduce="amin")
    first = unseen & (table[neighbours] == marker)
    rank = torch.cumsum(first, 0) - 1
    new_ids = torch.where(first, next_id + rank, -1).to(table.dtype)
    table.index_put_((torch.where(first, neighbours, pad),), new_ids)
    return first, rank
