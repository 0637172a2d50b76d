"""The padded lookup of a :class:`~.table.ShardedEmbedding` over several ranks: what a step
captured in a CUDA graph looks up (:meth:`~.table.ShardedEmbedding.lookup_padded`).

Nothing has a size that depends on the data and nothing is read back: the distinct ids of
the batch (at the buffer's size, their number on the device) go to their owners in blocks
of a fixed number of slots per owner (the ids asked of that owner, then -1) with one
all-to-all; each owner reads the rows asked of it and sends them back in blocks of the same
size with a second. The update sends the row gradients back in the same blocks
(:func:`~.routes.touched_of`). Every rank's blocks have the same size; a rank that asks an
owner for more distinct ids than a block holds gets no row for the ids past it, which the
table's tally counts (:meth:`~.table.ShardedEmbedding.check_lookups` raises).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from distgnn_workload.embeddings.distinct import owner_blocks, slots_below, sorted_distinct
from distgnn_workload.embeddings.exchange import put_rows
from distgnn_workload.embeddings.routes import LookupRows, Route

if TYPE_CHECKING:
    from distgnn_workload.embeddings.table import ShardedEmbedding


def lookup_blocks(table: ShardedEmbedding, flat: Tensor, count: Tensor, block: int) -> Tensor:
    """:meth:`~.table.ShardedEmbedding.lookup_padded` of ``table`` over several ranks: each
    rank asks each owner for a block of ``block`` slots, the owner serves them in blocks of
    the same size, nothing is read back (see the module)."""
    ex, n, size = table.exchange, table.num_rows, flat.numel()
    world = ex.world_size
    real_ids = slots_below(size, count, table.device)
    bad = ((flat < 0) | (flat >= n)) & real_ids
    valid = real_ids & ~bad
    distinct = sorted_distinct(flat, valid=valid, sentinel=n)
    real = distinct.valid()
    ids = distinct.ids.clamp(0, max(n - 1, 0))
    owner = torch.where(real, table._owner[ids], world)  # padding: a block past the last
    blocks, per_owner = owner_blocks(owner, world, block)
    asked = torch.full(((world + 1) * block,), -1, dtype=torch.int64, device=table.device)
    put_rows(asked, blocks, torch.where(real, table._local[ids], -1))
    served = ex.blocks(asked[: world * block])
    rows_block = table.weight[served.clamp(min=0)].to(table.out_dtype)
    got = ex.blocks(rows_block)
    rows = got[blocks.clamp(max=world * block - 1)]  # padding slots: any finite row
    ex.stats.lookups += 1
    remote = distinct.count - per_owner[table.rank]
    served_rows = (served >= 0).sum()
    mine = served[table.rank * block : (table.rank + 1) * block]
    served_remote = served_rows - (mine >= 0).sum()
    for name, value in (
        ("ids_sent", remote),
        ("rows_sent", served_remote),
        ("rows_read", served_rows),
        ("bytes_sent", remote * 8 + served_remote * table.dim * rows_block.element_size()),
    ):
        ex.stats.add(name, value)
    over = (per_owner[:world] - block).clamp(min=0).sum()
    table._tally.add_(torch.stack([distinct.count, bad.sum(), remote, over]))
    table._unchecked = True
    if not torch.is_grad_enabled():
        return rows[distinct.inverse]
    route = Route(distinct.inverse, None, [block] * world, [block] * world, served)
    route.blocks = blocks
    table._routes.append(route)
    out: Tensor = LookupRows.apply(table._anchor, rows, route)
    return out
