"""Padded lookups over several ranks: fixed blocks, no counts, several tables at once.

What a step captured in a CUDA graph looks up (:meth:`~.table.ShardedEmbedding.lookup_padded`,
:func:`lookup_padded_tables`): each rank sends every owner a block of a fixed number of slots
(the distinct ids it asks of that owner, then -1) and gets the rows back in blocks of the
same size; the step's update sends each row's gradient back to its owner in the same blocks
(:func:`reduce_touched_tables`). The tables of one step that share an exchange, a row width
and a row dtype go together: their blocks are laid side by side per destination, so that a
step makes three all-to-alls (ids, rows, row gradients) for all of them rather than three
per table. Every rank groups the same tables (the grouping depends only on the tables and
the kind of lookup, which every rank shares), so the collectives match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from distgnn_workload.embeddings.distinct import (
    Distinct,
    owner_blocks,
    slots_below,
    sorted_distinct,
)
from distgnn_workload.embeddings.exchange import RowExchange, put_rows
from distgnn_workload.embeddings.routes import LookupRows, Route, Touched, sum_touched

if TYPE_CHECKING:
    from distgnn_workload.embeddings.table import ShardedEmbedding


@dataclass(frozen=True)
class AskedBlocks:
    """One table's side of a padded lookup before anything is sent: its distinct ids, each
    slot's place in the blocks (``owner * block + position``; padding past the last rank's)
    and the local rows it asks of each owner (``world * block``, -1 where padding)."""

    distinct: Distinct
    places: Tensor
    per_owner: Tensor
    asked: Tensor
    bad: Tensor
    block: int


def ask_blocks(table: ShardedEmbedding, flat: Tensor, count: Tensor, block: int) -> AskedBlocks:
    """The distinct real ids of ``flat[:count]`` in range, grouped into ``block`` slots per
    owner. No host sync."""
    world, n = table.exchange.world_size, table.num_rows
    real_ids = slots_below(flat.numel(), count, table.device)
    bad = ((flat < 0) | (flat >= n)) & real_ids
    distinct = sorted_distinct(flat, valid=real_ids & ~bad, sentinel=n)
    real = distinct.valid()
    ids = distinct.ids.clamp(0, max(n - 1, 0))
    owner = torch.where(real, table._owner[ids], world)  # padding: a block past the last
    places, per_owner = owner_blocks(owner, world, block)
    asked = torch.full(((world + 1) * block,), -1, dtype=torch.int64, device=table.device)
    put_rows(asked, places, torch.where(real, table._local[ids], -1))
    return AskedBlocks(distinct, places, per_owner, asked[: world * block], bad, block)


def exchange_side_by_side(
    ex: RowExchange, parts: Sequence[Tensor], blocks: Sequence[int]
) -> list[Tensor]:
    """One all-to-all of several tables' blocks: ``parts[i]`` holds ``world * blocks[i]``
    rows, block ``r`` for rank ``r``. Each destination gets every table's block for it side
    by side; returns, per table, the blocks each rank sent here, in rank order."""
    if len(parts) == 1:
        return [ex.blocks(parts[0])]
    world, rest = ex.world_size, tuple(parts[0].shape[1:])
    joined = torch.cat(
        [p.reshape(world, b, *rest) for p, b in zip(parts, blocks, strict=True)], dim=1
    )
    got = ex.blocks(joined.reshape(-1, *rest)).reshape(world, sum(blocks), *rest)
    pieces = torch.split(got, list(blocks), dim=1)
    return [g.reshape(world * b, *rest) for g, b in zip(pieces, blocks, strict=True)]


def groups(tables: Sequence[ShardedEmbedding]) -> list[list[int]]:
    """The positions of ``tables`` in groups that exchange together: one exchange, one row
    width and one row dtype (in the order of each group's first table)."""
    out: dict[tuple[int, int, torch.dtype], list[int]] = {}
    for i, t in enumerate(tables):
        out.setdefault((id(t.exchange), t.dim, t.out_dtype), []).append(i)
    return list(out.values())


def lookup_padded_tables(
    tables: Sequence[ShardedEmbedding],
    ids: Sequence[Tensor],
    counts: Sequence[Tensor],
    blocks: Sequence[int | None],
) -> list[Tensor]:
    """``[t.lookup_padded(i, c, b) for ...]`` with the tables of a group exchanged together
    (see the module). Collective: every rank passes the same tables with the same blocks."""
    if not len(tables) == len(ids) == len(counts) == len(blocks):
        raise ValueError(
            f"{len(tables)} tables, {len(ids)} id buffers, {len(counts)} counts and "
            f"{len(blocks)} blocks: give one of each per table"
        )
    out: list[Tensor | None] = [None] * len(tables)
    for group in groups(tables):
        if tables[group[0]].exchange.world_size == 1:
            for i in group:
                out[i] = tables[i].lookup_padded(ids[i], counts[i], blocks[i])
            continue
        fitted = [_fitted(ids[i].numel(), blocks[i]) for i in group]
        rows = lookup_group(
            [tables[i] for i in group], [ids[i] for i in group], [counts[i] for i in group], fitted
        )
        for i, r in zip(group, rows, strict=True):
            out[i] = r
    return [r for r in out if r is not None]


def _fitted(size: int, block: int | None) -> int:
    """A block of at most ``size`` slots (None: ``size``, room for any batch)."""
    return size if block is None else min(block, size)


def lookup_group(
    tables: list[ShardedEmbedding], ids: list[Tensor], counts: list[Tensor], blocks: list[int]
) -> list[Tensor]:
    """The padded lookups of ``tables`` (one exchange, row width and row dtype; several
    ranks) in blocks of ``blocks[i]`` slots: two all-to-alls for all of them."""
    ex = tables[0].exchange
    asks = [ask_blocks(t, i, c, b) for t, i, c, b in zip(tables, ids, counts, blocks, strict=True)]
    served = exchange_side_by_side(ex, [a.asked for a in asks], blocks)
    read = [t.weight[s.clamp(min=0)].to(t.out_dtype) for t, s in zip(tables, served, strict=True)]
    got = exchange_side_by_side(ex, read, blocks)
    return [
        _finish(t, a, s, r, g)
        for t, a, s, r, g in zip(tables, asks, served, read, got, strict=True)
    ]


def _finish(
    table: ShardedEmbedding, ask: AskedBlocks, served: Tensor, read: Tensor, got: Tensor
) -> Tensor:
    """The rows of one table's padded lookup from the blocks that came back; its counters
    and its route for the update."""
    ex, world, block, rank = table.exchange, table.exchange.world_size, ask.block, table.rank
    distinct = ask.distinct
    rows = got[ask.places.clamp(max=world * block - 1)]  # padding slots: any finite row
    ex.stats.lookups += 1
    remote = distinct.count - ask.per_owner[rank]
    served_rows = (served >= 0).sum()
    mine = served[rank * block : (rank + 1) * block]
    served_remote = served_rows - (mine >= 0).sum()
    for name, value in (
        ("ids_sent", remote),
        ("rows_sent", served_remote),
        ("rows_read", served_rows),
        ("bytes_sent", remote * 8 + served_remote * table.dim * read.element_size()),
    ):
        ex.stats.add(name, value)
    over = (ask.per_owner[:world] - block).clamp(min=0).sum()
    table._tally.add_(torch.stack([distinct.count, ask.bad.sum(), remote, over]))
    table._unchecked = True
    if not torch.is_grad_enabled():
        return rows[distinct.inverse]
    route = Route(distinct.inverse, None, [block] * world, [block] * world, served)
    route.blocks = ask.places
    table._routes.append(route)
    out: Tensor = LookupRows.apply(table._anchor, rows, route)
    return out


def reduce_touched_tables(tables: Sequence[ShardedEmbedding]) -> list[Touched | None]:
    """``[t.reduce_touched() for t in tables]``, with the row gradients of the tables whose
    step made one padded lookup each sent in one all-to-all per group (see the module).
    Collective."""
    out: list[Touched | None] = [None] * len(tables)
    single = [
        i for i, t in enumerate(tables) if len(t._routes) == 1 and t._routes[0].blocks is not None
    ]
    for group in groups([tables[i] for i in single]):
        members = [single[g] for g in group]
        if len(members) == 1:
            continue  # reduce_touched below
        ts = [tables[i] for i in members]
        routes = [t._routes.pop() for t in ts]
        ex = ts[0].exchange
        blocks = [r.send[0] for r in routes]
        sent = [
            ex.slot_rows(_grad_of(r, t), r.blocks, b)
            for t, r, b in zip(ts, routes, blocks, strict=True)
            if r.blocks is not None
        ]
        grads = exchange_side_by_side(ex, sent, blocks)
        for i, t, r, g in zip(members, ts, routes, grads, strict=True):
            out[i] = sum_touched([r], [g.float()], t.num_rows, t.device)
    for i, t in enumerate(tables):
        if out[i] is None:
            out[i] = t.reduce_touched()
    return out


def _grad_of(route: Route, table: ShardedEmbedding) -> Tensor:
    grad = route.grad
    if grad is None:  # the lookup's rows did not reach the loss: zero gradients, same sends
        grad = torch.zeros((route.inverse.numel(), table.dim), device=table.device)
    return grad.to(table.out_dtype)
