"""A learnable embedding table of one featureless node type, sharded over trainer ranks.

Each rank keeps only the rows it owns (:class:`~.ownership.RowOwnership`), in fp32. A
lookup is collective: every rank calls :meth:`ShardedEmbedding.lookup` for every table, in
the same order, once per step (with no ids if it needs none). A lookup

1. takes the distinct ids of the batch (each row is asked for once), grouped by owner;
2. exchanges the counts on the host group, then the ids with one all-to-all;
3. has each owner read the rows asked of it and send them back with a second all-to-all;
4. returns ``rows[inverse]``, differentiable.

The backward sums the gradients of repeated ids into one row per distinct id and keeps them
on the rank that asked. The optimizer's :meth:`reduce_grads` (after ``loss.backward()``)
sends each row's gradient to its owner with a third all-to-all, in the order of the ids of
step 2; the owner sums the gradients that several ranks sent for one row. Only the rows a
mini-batch touches are read, sent and updated. The gradients never pass through the
autograd engine's scheduling order, so no rank can start a collective that another rank
issues in a different order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.embeddings.exchange import ExchangeStats, RowExchange, host_copy, sum_rows
from distgnn_workload.embeddings.ownership import RowOwnership
from distgnn_workload.runtime.transfers import to_device

INIT_CHUNK_ROWS = 65536
"""Initial rows are drawn in chunks of this many ids, each from its own generator, so that a
row's initial value depends on (seed, node type, id) only, never on who owns it."""


class LookupRangeError(IndexError):
    """A lookup had ids outside the node type's range; raised on every rank of the step."""


def initial_rows(seed: int, node_type: str, rows: Tensor, dim: int, *, std: float = 1.0) -> Tensor:
    """The initial values N(0, std^2) of the type-local ids ``rows`` (increasing), fp32 CPU."""
    rows = rows.cpu().to(torch.int64)
    out = torch.empty((rows.numel(), dim), dtype=torch.float32)
    if rows.numel() == 0:
        return out
    chunk_of = rows // INIT_CHUNK_ROWS
    for chunk in torch.unique(chunk_of).tolist():
        key = hashlib.sha256(f"{seed}:{node_type}:{chunk}".encode()).digest()
        gen = torch.Generator().manual_seed(int.from_bytes(key[:8], "little") >> 1)
        values = torch.randn((INIT_CHUNK_ROWS, dim), generator=gen).mul_(std)
        at = (chunk_of == chunk).nonzero().flatten()
        out[at] = values[rows[at] - chunk * INIT_CHUNK_ROWS]
    return out


@dataclass
class _Route:
    """One lookup's distinct ids, how they went to their owners, and their gradients."""

    inverse: Tensor  # batch position -> distinct id
    perm: Tensor  # distinct ids in the order they were sent (grouped by owner)
    send: list[int]  # ids sent to each rank
    recv: list[int]  # ids received from each rank
    served: Tensor  # the local rows of this shard that each rank asked for, in rank order
    grad: Tensor | None = None  # [distinct ids, dim] fp32, summed over the batch


class _Lookup(torch.autograd.Function):
    """``rows[inverse]``; the backward keeps the summed row gradients in the route."""

    @staticmethod
    def forward(ctx: Any, anchor: Tensor, rows: Tensor, route: _Route) -> Tensor:
        del anchor  # only there so that autograd calls the backward
        ctx.route = route
        ctx.num_rows = rows.shape[0]
        return rows[route.inverse]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, None]:
        route: _Route = ctx.route
        summed = sum_rows(grad.float(), route.inverse, ctx.num_rows)
        route.grad = summed if route.grad is None else route.grad + summed
        return None, None, None


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
        self.rows = ownership.rows_of(self.rank)
        init = initial_rows(seed, self.node_type, self.rows, dim, std=init_std)
        self.weight = to_device(init, self.device)
        self._owner = to_device(ownership.owner, self.device)
        self._local = to_device(ownership.local, self.device)
        self._anchor = torch.empty(0, device=self.device, requires_grad=True)
        self._routes: list[_Route] = []
        self.rows_looked_up = 0
        """Distinct rows of this table that this rank's lookups asked for, all owners."""
        self.rows_received = 0
        """Of those, the rows that came from other ranks."""

    @property
    def num_rows(self) -> int:
        """Rows of the whole table (all ranks)."""
        return self.ownership.num_rows

    @property
    def stats(self) -> ExchangeStats:
        """What this rank sent, over all the tables that share its exchange."""
        return self.exchange.stats

    def __repr__(self) -> str:
        return (
            f"ShardedEmbedding({self.node_type!r}, rows={self.num_rows}, dim={self.dim}, "
            f"rank {self.rank}/{self.exchange.world_size}, shard={self.rows.numel()})"
        )

    # ------------------------------------------------------------------ lookup

    def lookup(self, ids: Tensor) -> Tensor:
        """The rows of the type-local ``ids`` (any shape): ``[*ids.shape, dim]``.

        Collective: every rank calls it, with its own ids, in the same order of tables.
        Differentiable while grad mode is on; :meth:`reduce_grads` then collects the
        gradients (a sparse optimizer's ``step`` calls it).
        """
        flat = to_device(ids.reshape(-1), self.device).to(torch.int64)
        self.exchange.settle(f"the embedding lookup of {self.node_type!r}")
        n = self.num_rows
        out_of_range = (flat < 0) | (flat >= n)
        distinct, inverse = torch.unique(flat.clamp(0, max(n - 1, 0)), return_inverse=True)
        owner = self._owner[distinct]
        perm = torch.argsort(owner, stable=True)
        send_counts = torch.bincount(owner, minlength=self.exchange.world_size)
        counts = self.exchange.counts(send_counts, out_of_range.sum())
        if counts.bad_ranks:
            raise self._range_error(flat, out_of_range, counts.bad_ranks)
        ex = self.exchange
        served = ex.rows(self._local[distinct[perm]], counts.send, counts.recv)
        block = self.weight[served].to(self.out_dtype)
        got = ex.rows(block, counts.recv, counts.send)
        rows = torch.empty_like(got)
        rows[perm] = got
        s = ex.stats
        s.lookups += 1
        s.rows_read += served.numel()
        remote_ids, remote_rows = ex.remote(counts.send), ex.remote(counts.recv)
        s.ids_sent += remote_ids
        s.rows_sent += remote_rows
        s.bytes_sent += remote_ids * 8 + remote_rows * self.dim * block.element_size()
        self.rows_looked_up += distinct.numel()
        self.rows_received += remote_ids
        if not torch.is_grad_enabled():
            return rows[inverse].reshape(*ids.shape, self.dim)
        route = _Route(inverse, perm, counts.send, counts.recv, served)
        self._routes.append(route)
        out: Tensor = _Lookup.apply(self._anchor, rows, route)
        return out.reshape(*ids.shape, self.dim)

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
        """Send the row gradients of this step's lookups to their owners and sum them.

        Collective. Returns the distinct local rows of this shard that the step touched
        (increasing) and their summed fp32 gradients; None when no lookup took part in
        autograd this step (on any rank: lookups are collective). A lookup whose result
        did not reach the loss sends zero gradients for its rows, so that the collectives
        still match; the optimizer then updates those rows with a zero gradient.
        """
        routes, self._routes = self._routes, []
        if not routes:
            return None
        ex = self.exchange
        ex.settle(f"the embedding gradients of {self.node_type!r}")
        # before any collective is queued: unique reads its size back from the device
        touched, inverse = torch.unique(torch.cat([r.served for r in routes]), return_inverse=True)
        grads: list[Tensor] = []
        for route in routes:
            grad = route.grad
            if grad is None:
                grad = torch.zeros((route.perm.numel(), self.dim), device=self.device)
            block = grad[route.perm].to(self.out_dtype)
            grads.append(ex.rows(block, route.send, route.recv).float())
            remote = ex.remote(route.send)
            ex.stats.grad_rows_sent += remote
            ex.stats.bytes_sent += remote * self.dim * block.element_size()
        return touched, sum_rows(torch.cat(grads), inverse, touched.numel())

    def discard_grads(self) -> None:
        """Forget this step's lookups without an update (every rank must do the same)."""
        self._routes = []

    # ------------------------------------------------------------------ state

    def layout(self) -> dict[str, Any]:
        """What identifies the layout of this rank's shard."""
        return {
            "node_type": self.node_type,
            "num_rows": self.num_rows,
            "dim": self.dim,
            "world_size": self.exchange.world_size,
            "rank": self.rank,
            "ownership": self.ownership.digest(),
        }

    def shard_state(self) -> dict[str, Any]:
        """This rank's rows and the layout they belong to (host tensors)."""
        return {
            **self.layout(),
            "rows": self.rows.clone(),
            "weight": host_copy(self.weight, f"the embedding rows of {self.node_type!r}"),
        }

    def load_shard_state(self, state: dict[str, Any], *, source: str = "the checkpoint") -> None:
        """Take the rows of a :meth:`shard_state` of the same layout."""
        for key, value in self.layout().items():
            if state.get(key) != value:
                raise ValueError(
                    f"{source}: embedding {self.node_type!r} has {key}={state.get(key)!r} "
                    f"but this job has {value!r}; the job changed since it was written"
                )
        weight = state["weight"]
        if tuple(weight.shape) != (self.rows.numel(), self.dim):
            raise ValueError(
                f"{source}: embedding {self.node_type!r} holds {tuple(weight.shape)} rows, "
                f"this rank owns {(self.rows.numel(), self.dim)}"
            )
        self.weight = to_device(weight.to(torch.float32), self.device).clone()
