"""A learnable embedding table of one featureless node type, sharded over trainer ranks.

Each rank keeps only the rows it owns (:class:`~.ownership.RowOwnership`), in fp32. A
lookup is collective: every rank calls :meth:`ShardedEmbedding.lookup` for every table, in
the same order, once per step (with no ids if it needs none). A lookup

1. takes the distinct ids of the batch (each row is asked for once), grouped by owner;
2. exchanges the counts on the host group, then the ids with one all-to-all;
3. has each owner read the rows asked of it and send them back with a second all-to-all;
4. returns ``rows[inverse]``, differentiable.

The backward sums the gradients of repeated ids into one row per distinct id and keeps them
on the rank that asked. The optimizer's :meth:`reduce_touched` (after ``loss.backward()``)
sends each row's gradient to its owner with a third all-to-all, in the order of the ids of
step 2; the owner sums the gradients that several ranks sent for one row. Only the rows a
mini-batch touches are read, sent and updated. The gradients never pass through the
autograd engine's scheduling order, so no rank can start a collective that another rank
issues in a different order.

Distinct ids are kept at the batch's size (:func:`~.distinct.sorted_distinct`), their
number on the device, so that nothing but the exchange's counts is read back. With one
rank (every row local) there is no exchange at all and a step reads nothing back: the
lookup gathers the padded distinct rows, the optimizer updates them under the device-side
count, and the rows-looked-up counters and the range check of ids on a GPU wait on the
device until read (:meth:`ShardedEmbedding.take_counts`, :meth:`check_lookups`).
:meth:`ShardedEmbedding.lookup_padded` reads no counts with several ranks either: it sends
blocks of a fixed size (what a captured step looks up), the whole buffer or a block fitted to
the ids each owner is asked for (the caller checks each batch's
:meth:`~ShardedEmbedding.owner_counts` against it before the step).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from distgnn_workload.embeddings.distinct import slots_below, sorted_distinct
from distgnn_workload.embeddings.exchange import (
    Counts,
    ExchangeStats,
    RowExchange,
    host_copy,
)
from distgnn_workload.embeddings.init_rows import initial_rows
from distgnn_workload.embeddings.ownership import RowOwnership
from distgnn_workload.embeddings.padded import lookup_blocks
from distgnn_workload.embeddings.routes import (
    LookupRows,
    PendingLookup,
    Route,
    Touched,
    touched_of,
)
from distgnn_workload.pinned_copies import to_device
from distgnn_workload.runtime.features.tiers import pinned_rows


class LookupRangeError(IndexError):
    """A lookup had ids outside the node type's range; raised on every rank of the step."""


class ShardedEmbedding:
    """The rows of ``ownership.node_type`` that this rank owns, served to every rank.

    ``out_dtype`` is the dtype of the rows a lookup returns and of the rows and gradients
    sent between ranks (bf16 halves the traffic); the master rows stay fp32.
    """

    def __init__(
        self,
        ownership: RowOwnership,
        dim: int,
        exchange: RowExchange,
        *,
        seed: int = 0,
        init_std: float = 1.0,
        out_dtype: torch.dtype = torch.float32,
        host_memory: bool = False,
    ) -> None:
        if dim < 1:
            raise ValueError(f"node type {ownership.node_type!r}: embedding dim must be >= 1")
        if exchange.world_size != ownership.world_size:
            raise ValueError(
                f"node type {ownership.node_type!r}: ownership is over "
                f"{ownership.world_size} ranks but the exchange over {exchange.world_size}"
            )
        self.node_type = ownership.node_type
        self.ownership = ownership
        self.dim = dim
        self.exchange = exchange
        self.rank = exchange.rank
        self.device = exchange.device
        self.out_dtype = out_dtype
        self.host_memory = host_memory
        """Whether the shard and its optimizer state live in pinned host memory, which a GPU
        reads and updates in place (UVA), rather than in the device's memory."""
        self.rows = ownership.rows_of(self.rank)
        init = initial_rows(seed, self.node_type, self.rows, dim, std=init_std)
        self.weight = self.new_rows(init)
        self._owner = to_device(ownership.owner, self.device)
        self._local = to_device(ownership.local, self.device)
        self._anchor = torch.empty(0, device=self.device, requires_grad=True)
        self._routes: list[Route] = []
        self._looked_up = 0
        self._received = 0
        self._taken = (0, 0)
        # [rows looked up, ids out of range, rows received, ids past a full block] of the
        # lookups that read nothing back (one rank's, padded ones), added in place on the
        # device
        self._tally = torch.zeros(4, dtype=torch.int64, device=self.device)
        self._unchecked = False  # whether a lookup added to the tally since the last check
        self.defer_checks = self.device.type == "cuda"
        """Whether a one-rank lookup leaves its range check on the device, raised by
        :meth:`check_lookups` (on GPUs, so that no step reads anything back)."""

    def new_rows(self, values: Tensor) -> Tensor:
        """A tensor of this shard's shape holding ``values`` (host, fp32), where the shard
        keeps its rows: the device, or pinned host memory (see :attr:`host_memory`)."""
        if self.host_memory:
            return pinned_rows(values, self.device, "spec.trainers.embeddingMemory")
        return to_device(values, self.device)

    def rows_like(self, fill: float) -> Tensor:
        """A tensor like the shard's rows, every entry ``fill``, where the shard keeps them
        (an optimizer's per-row state)."""
        if self.host_memory:
            return self.new_rows(torch.full(tuple(self.weight.shape), fill))
        return torch.full_like(self.weight, fill)

    @property
    def num_rows(self) -> int:
        """Rows of the whole table (all ranks)."""
        return self.ownership.num_rows

    @property
    def rows_looked_up(self) -> int:
        """Distinct rows of this table that this rank's lookups asked for, all owners."""
        self.check_lookups()
        return self._looked_up

    @property
    def rows_received(self) -> int:
        """Of those, the rows that came from other ranks."""
        return self._received

    def take_counts(self) -> tuple[int, int]:
        """``(rows looked up, rows received)`` since the last call (one read-back on GPUs)."""
        now = (self.rows_looked_up, self.rows_received)
        before, self._taken = self._taken, now
        return now[0] - before[0], now[1] - before[1]

    def check_lookups(self) -> None:
        """Read the counts a local lookup left on the device; raise
        :class:`LookupRangeError` if any id since the last check was out of range."""
        if not self._unchecked:
            return
        self._unchecked = False
        tally = host_copy(self._tally, "the embedding counts").tolist()
        looked_up, bad, received, over = (int(v) for v in tally)
        self._tally.zero_()
        self._looked_up += looked_up
        self._received += received
        if over:
            raise RuntimeError(
                f"node type {self.node_type!r}: {over} distinct ids looked up since the last "
                "check did not fit their owner's block of a padded lookup and got no row; "
                "the caller must step a batch whose ids per owner exceed the block eagerly "
                "(ShardedEmbedding.owner_counts)"
            )
        if bad:
            span = f"0..{self.num_rows - 1}" if self.num_rows else "(the table is empty)"
            raise LookupRangeError(
                f"node type {self.node_type!r}: {bad} ids looked up since the last check were "
                f"outside {span} (they were left out of the lookups); embedding lookups take "
                f"type-local ids of {self.node_type!r}, not global or other types' ids"
            )

    @property
    def stats(self) -> ExchangeStats:
        """What this rank sent, over all the tables that share its exchange."""
        return self.exchange.stats

    def __repr__(self) -> str:
        return (
            f"ShardedEmbedding({self.node_type!r}, rows={self.num_rows}, dim={self.dim}, "
            f"rank {self.rank}/{self.exchange.world_size}, shard={self.rows.numel()}"
            f"{', host memory' if self.host_memory else ''})"
        )

    # ------------------------------------------------------------------ lookup

    def lookup(self, ids: Tensor) -> Tensor:
        """The rows of the type-local ``ids`` (any shape): ``[*ids.shape, dim]``.

        Collective: every rank calls it, with its own ids, in the same order of tables.
        Differentiable while grad mode is on; :meth:`reduce_grads` then collects the
        gradients (a sparse optimizer's ``step`` calls it).
        """
        flat = to_device(ids.reshape(-1), self.device).to(torch.int64)
        if self.exchange.world_size == 1:
            return self._lookup_local(flat, ids.shape)
        pending = self._prepare(flat, ids.shape)
        counts = self.exchange.counts(pending.send_counts, pending.out_of_range.sum())
        if counts.bad_ranks:
            raise self._range_error(flat, pending.out_of_range, counts.bad_ranks)
        return self._finish(pending, counts)

    def lookup_padded(self, ids: Tensor, count: Tensor, block: int | None = None) -> Tensor:
        """The rows of ``ids[:count]`` (1-D, on the device; ``count`` a 0-d device tensor)
        and finite rows for the slots past it: ``[ids.numel(), dim]``, differentiable.

        Fixed shapes, nothing read back: what a step captured in a CUDA graph looks up.
        Ids out of range are left out, and reported by :meth:`check_lookups` (on this rank
        only). The host-side counters of a replayed lookup are :meth:`replayed`'s.

        Collective with several ranks, as :meth:`lookup`, but with no counts: each rank
        sends every rank a block of ``block`` slots (the ids it asks of that owner, then
        -1; None: ``ids.numel()``, room for any batch) and gets the rows back in blocks of
        the same size, equal on every rank. A smaller block moves and serves fewer padding
        rows; the caller must know that no rank asks any owner for more distinct ids than
        ``block`` (the trainer counts each batch's ids per owner before its step, see
        :meth:`owner_counts`): ids past a full block get no row, and :meth:`check_lookups`
        raises."""
        if self.exchange.world_size == 1:
            return self._lookup_local(ids, ids.shape, count=count)
        size = ids.numel()
        return lookup_blocks(self, ids, count, size if block is None else min(block, size))

    def owner_counts(self, ids: Tensor) -> Tensor:
        """How many of ``ids`` (type-local, in range) each rank owns: ``[world_size]`` on
        the device, no host sync. Counted with repeats, so never fewer than the distinct ids
        a lookup of ``ids`` sends each owner."""
        counts = torch.zeros(self.exchange.world_size, dtype=torch.int64, device=self.device)
        if ids.numel():
            owner = self._owner[to_device(ids, self.device).to(torch.int64)]
            counts.scatter_add_(0, owner, torch.ones_like(owner))
        return counts

    def replayed(self) -> None:
        """Count a lookup that a CUDA graph replayed (its device-side counts add themselves)."""
        self.exchange.stats.lookups += 1
        self._unchecked = True

    def _prepare(self, flat: Tensor, shape: torch.Size) -> PendingLookup:
        """A multi-rank lookup up to its counts: all on the device, nothing read back."""
        n = self.num_rows
        world = self.exchange.world_size
        out_of_range = (flat < 0) | (flat >= n)
        distinct = sorted_distinct(flat.clamp(0, max(n - 1, 0)))
        owner = torch.full_like(distinct.ids, world)
        if n:  # real slots to their owner, padding slots to a rank past the last
            owner = torch.where(distinct.valid(), self._owner[distinct.ids], owner)
        perm = torch.argsort(owner, stable=True)
        send_counts = torch.zeros(world + 1, dtype=torch.int64, device=self.device)
        send_counts.scatter_add_(0, owner, torch.ones_like(owner))
        return PendingLookup(flat, shape, out_of_range, distinct, perm, send_counts[:world])

    def _finish(self, pending: PendingLookup, counts: Counts) -> Tensor:
        """The rest of a multi-rank lookup, once the counts are on the host."""
        ex, distinct = self.exchange, pending.distinct
        perm = pending.perm[: sum(counts.send)]  # the real slots, grouped by owner
        served = ex.rows(self._local[distinct.ids[perm]], counts.send, counts.recv)
        block = self.weight[served].to(self.out_dtype)
        got = ex.rows(block, counts.recv, counts.send)
        rows = got.new_zeros((distinct.capacity, self.dim))
        rows[perm] = got
        s = ex.stats
        s.lookups += 1
        s.rows_read += served.numel()
        remote_ids, remote_rows = ex.remote(counts.send), ex.remote(counts.recv)
        s.ids_sent += remote_ids
        s.rows_sent += remote_rows
        s.bytes_sent += remote_ids * 8 + remote_rows * self.dim * block.element_size()
        self._looked_up += perm.numel()
        self._received += remote_ids
        if not torch.is_grad_enabled():
            return rows[distinct.inverse].reshape(*pending.shape, self.dim)
        route = Route(distinct.inverse, perm, counts.send, counts.recv, served)
        self._routes.append(route)
        out: Tensor = LookupRows.apply(self._anchor, rows, route)
        return out.reshape(*pending.shape, self.dim)

    def _lookup_local(
        self, flat: Tensor, shape: torch.Size, *, count: Tensor | None = None
    ) -> Tensor:
        """The lookup of a one-rank table: every row is here, nothing is sent or read back.
        With ``count``, only ``flat[:count]`` are ids (the rest is padding)."""
        n = self.num_rows
        bad = (flat < 0) | (flat >= n)
        valid = ~bad
        if count is not None:
            real = slots_below(flat.numel(), count, self.device)
            bad, valid = bad & real, valid & real
        if (not self.defer_checks or n == 0) and flat.numel() and bool(bad.any()):
            raise self._range_error(flat, bad, [self.rank])
        distinct = sorted_distinct(flat, valid=valid, sentinel=n)
        # one rank owns every row: a row's place in the shard is its id
        block = self.weight.index_select(0, distinct.ids).to(self.out_dtype)
        self.exchange.stats.lookups += 1
        self.exchange.stats.add("rows_read", distinct.count)
        self._tally[:2].add_(torch.stack([distinct.count, bad.sum()]))
        self._unchecked = True
        if not torch.is_grad_enabled():
            return block[distinct.inverse].reshape(*shape, self.dim)
        size = [distinct.capacity]
        route = Route(distinct.inverse, None, size, size, distinct.ids, distinct.count)
        self._routes.append(route)
        out: Tensor = LookupRows.apply(self._anchor, block, route)
        return out.reshape(*shape, self.dim)

    def _range_error(self, flat: Tensor, bad: Tensor, ranks: list[int]) -> LookupRangeError:
        span = f"0..{self.num_rows - 1}" if self.num_rows else "(the table is empty)"
        if self.rank in ranks:
            wrong = host_copy(flat[bad], f"the ids of {self.node_type!r} out of range")
            return LookupRangeError(
                f"node type {self.node_type!r}: {wrong.numel()} of {flat.numel()} ids are "
                f"outside {span} (e.g. {int(wrong[0])}); embedding lookups take "
                f"type-local ids of {self.node_type!r}, not global or other types' ids"
            )
        return LookupRangeError(
            f"node type {self.node_type!r}: rank(s) {ranks} looked up ids outside {span}; "
            "see their error for the ids"
        )

    # ------------------------------------------------------------------ gradients

    def reduce_grads(self) -> tuple[Tensor, Tensor] | None:
        """:meth:`reduce_touched`, cut to the touched rows (reads their number back)."""
        touched = self.reduce_touched()
        if touched is None:
            return None
        count = int(host_copy(touched.count, "the touched embedding rows"))
        return touched.rows[:count], touched.grad[:count]

    def reduce_touched(self) -> Touched | None:
        """Send the row gradients of this step's lookups to their owners and sum them.

        Collective. Returns the distinct local rows of this shard that the step touched and
        their summed fp32 gradients, padded (:class:`Touched`); None when no lookup took part
        in autograd this step (on any rank: lookups are collective). A lookup whose result
        did not reach the loss sends zero gradients for its rows, so that the collectives
        still match; the optimizer then updates those rows with a zero gradient.
        """
        routes, self._routes = self._routes, []
        if not routes:
            return None
        return touched_of(
            routes, self.exchange, self.dim, self.num_rows, self.out_dtype, self.device
        )

    def discard_grads(self) -> None:
        """Forget this step's lookups without an update (every rank must do the same)."""
        self._routes = []


def lookup_tables(tables: Sequence[ShardedEmbedding], ids: Sequence[Tensor]) -> list[Tensor]:
    """``[table.lookup(i) for table, i in zip(tables, ids)]`` with one exchange of counts for
    all of them (one read-back per step instead of one per table). Collective: every rank
    calls it with the same tables, and looks these tables up only this way in a phase where
    another rank may do so (the counts' collectives must match)."""
    if len(tables) != len(ids):
        raise ValueError(f"{len(tables)} tables but {len(ids)} id tensors")
    exchanges = {id(t.exchange) for t in tables}
    if not tables or tables[0].exchange.world_size == 1 or len(exchanges) > 1:
        return [table.lookup(i) for table, i in zip(tables, ids, strict=True)]
    pending = [
        table._prepare(to_device(i.reshape(-1), table.device).to(torch.int64), i.shape)
        for table, i in zip(tables, ids, strict=True)
    ]
    counts = tables[0].exchange.counts_of(
        [p.send_counts for p in pending], [p.out_of_range.sum() for p in pending]
    )
    for table, p, c in zip(tables, pending, counts, strict=True):
        if c.bad_ranks:  # every rank sees the same flags: all raise before any row moves
            raise table._range_error(p.flat, p.out_of_range, c.bad_ranks)
    return [t._finish(p, c) for t, p, c in zip(tables, pending, counts, strict=True)]
