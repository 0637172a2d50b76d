"""Global id -> batch-local id relabelling through a preallocated table, with no sort.

The table has one slot per global id (plus one padding id) and holds -1 for ids not in the
batch. Each unseen id of a hop gets a marker below -1 through an atomic ``amin`` of its
positions, so its first position wins and new ids are numbered in order of first appearance.
These are the steps of the samplers' relabelling, as functions of a table; the static
execution runs them once per hop over every node type's table (:class:`RelabelTables`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

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


SPREAD_PADDING = False
"""How :func:`first_seen` keeps the invalid entries of a padded hop out of its ``amin``:
False sends each to its padding id with that slot's own value (-1: no change), so that every
invalid entry of the hop contends for a few slots' atomics; True sends them to slots spread
over the table with the largest value (no change to any slot). Both leave the same table;
which is faster on a GPU is for the benchmark to say, so the first stays the default."""


def first_seen(
    table: Tensor, neighbours: Tensor, valid: Tensor, *, spread: bool | None = None
) -> Tensor:
    """The entries of ``neighbours`` that are the first appearance of an id not yet in the
    table (no compaction, no host sync); number them with :func:`assign`.

    Invalid entries point at a padding id and are never new (``spread``: see
    :data:`SPREAD_PADDING`, its default).
    """
    count = neighbours.numel()
    current = table[neighbours]
    unseen = (current < 0) & valid
    marker = torch.arange(count, dtype=table.dtype, device=table.device) - (count + 1)
    values = torch.where(unseen, marker, current)
    targets = neighbours
    if SPREAD_PADDING if spread is None else spread:
        size = table.numel()
        slots = torch.arange(count, device=table.device)
        values = torch.where(valid, values, torch.iinfo(table.dtype).max)
        targets = torch.where(valid, neighbours, slots if count <= size else slots % size)
    table.scatter_reduce_(0, targets, values, reduce="amin")
    first: Tensor = unseen & (table[neighbours] == marker)
    return first


def assign(table: Tensor, neighbours: Tensor, first: Tensor, local: Tensor, pad: int) -> None:
    """Give each first appearance its local id ``local``; every other entry writes -1 to the
    padding slot ``pad`` (its slot ends up -1 like every other slot of the batch)."""
    new_ids = torch.where(first, local, -1).to(table.dtype)
    table.index_put_((torch.where(first, neighbours, pad),), new_ids)


class RelabelTables(Mapping[str, Tensor]):
    """Every node type's global -> local table in one buffer.

    Type ``t``'s table is the view ``buffer[offsets[t] : offsets[t] + size[t]]`` (its last
    slot the padding id's), so one relabelling can run over the ids of several types at
    once, each shifted by its type's offset. As a mapping it gives the per-type views.
    """

    def __init__(self, buffer: Tensor, sizes: Mapping[str, int]) -> None:
        self.buffer = buffer
        self.offsets: dict[str, int] = {}
        at = 0
        for t, n in sizes.items():
            self.offsets[t], at = at, at + n
        if at != buffer.numel():
            raise ValueError(f"tables of {at} slots in all in a buffer of {buffer.numel()}")
        self._views = {t: buffer[self.offsets[t] : self.offsets[t] + n] for t, n in sizes.items()}

    @classmethod
    def empty(cls, num_nodes: Mapping[str, int], device: torch.device) -> RelabelTables:
        """All -1: per type ``num_nodes[t] + 1`` slots (the last the padding id's)."""
        sizes = {t: n + 1 for t, n in num_nodes.items()}
        dtype = table_dtype(device)
        return cls(torch.full((sum(sizes.values()),), -1, dtype=dtype, device=device), sizes)

    @classmethod
    def of(cls, tables: Mapping[str, Tensor]) -> RelabelTables:
        """``tables`` as one buffer: a :class:`RelabelTables` as it is, or one table."""
        if isinstance(tables, RelabelTables):
            return tables
        if len(tables) != 1:
            raise TypeError(
                "tables of several node types must share one buffer: give a RelabelTables"
            )
        ((t, table),) = tables.items()
        return cls(table, {t: table.numel()})

    def __getitem__(self, node_type: str) -> Tensor:
        return self._views[node_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._views)

    def __len__(self) -> int:
        return len(self._views)
