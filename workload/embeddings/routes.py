"""What a lookup of a :class:`~.table.ShardedEmbedding` leaves for its backward and update:
the route of its distinct ids, the autograd function that keeps their gradients, a
multi-rank lookup waiting for its counts, and the touched rows a step hands the optimizer
(:func:`touched_of`: the routes' gradients sent to their owners and summed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.embeddings.distinct import (
    Distinct,
    repeat_last,
    slots_below,
    sorted_distinct,
)
from distgnn_workload.embeddings.exchange import RowExchange, sum_rows


@dataclass(frozen=True)
class Touched:
    """The rows of this rank's shard that a step touched, at a fixed capacity.

    ``rows[:count]`` are the distinct local rows (increasing) and ``grad[:count]`` their
    summed fp32 gradients; the slots past ``count`` repeat the last row and its gradient
    (:func:`~.distinct.repeat_last`), so an update of every slot writes each row once in
    effect. ``count`` is a 0-d device tensor.
    """

    rows: Tensor
    grad: Tensor
    count: Tensor


@dataclass
class Route:
    """One lookup's distinct ids, how they went to their owners, and their gradients."""

    inverse: Tensor  # batch position -> distinct slot
    perm: Tensor | None  # the real slots in the order sent (grouped by owner); None: local
    send: list[int]  # ids sent to each rank
    recv: list[int]  # ids received from each rank
    served: Tensor  # the local rows of this shard that each rank asked for, in rank order
    count: Tensor | None = None  # local: the real slots of ``served`` (padded), on the device
    grad: Tensor | None = None  # [distinct slots, dim] fp32, summed over the batch
    blocks: Tensor | None = None
    """Padded exchange (:meth:`~.table.ShardedEmbedding.lookup_padded`, several ranks): each
    distinct slot's place in the blocks sent, ``owner * slots + position`` (padding slots
    in a block past the last rank's); ``served`` then holds -1 where a block was padding."""


class LookupRows(torch.autograd.Function):
    """``rows[inverse]``; the backward keeps the summed row gradients in the route."""

    @staticmethod
    def forward(ctx: Any, anchor: Tensor, rows: Tensor, route: Route) -> Tensor:
        del anchor  # only there so that autograd calls the backward
        ctx.route = route
        ctx.num_rows = rows.shape[0]
        return rows[route.inverse]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, None, None]:
        route: Route = ctx.route
        summed = sum_rows(grad.float(), route.inverse, ctx.num_rows)
        route.grad = summed if route.grad is None else route.grad + summed
        return None, None, None


@dataclass(frozen=True)
class PendingLookup:
    """A multi-rank lookup before its counts are exchanged: its distinct ids (padded), the
    slots grouped by owner and the ids it sends to each rank (on the device)."""

    flat: Tensor
    shape: torch.Size
    out_of_range: Tensor
    distinct: Distinct
    perm: Tensor
    send_counts: Tensor


def touched_of(
    routes: list[Route],
    ex: RowExchange,
    dim: int,
    num_rows: int,
    out_dtype: torch.dtype,
    device: torch.device,
) -> Touched:
    """Send the row gradients of a step's lookups (``routes``, of one table of ``num_rows``
    rows of width ``dim``) to their owners over ``ex`` in ``out_dtype`` and sum them per
    row: the distinct local rows this shard's owner touched and their fp32 gradients,
    padded (see :meth:`~.table.ShardedEmbedding.reduce_touched`). Collective."""
    grads: list[Tensor] = []
    for route in routes:
        grad = route.grad
        if grad is None:
            grad = torch.zeros((route.inverse.numel(), dim), device=device)
        if route.blocks is not None:  # padded: each slot's gradient to its owner's block
            grads.append(ex.slot_blocks(grad.to(out_dtype), route.blocks, route.send[0]).float())
            continue
        if route.perm is None:  # local: the exchange's rounding only
            grads.append(grad.to(out_dtype).float())
            continue
        block = grad[route.perm].to(out_dtype)
        grads.append(ex.rows(block, route.send, route.recv).float())
        remote = ex.remote(route.send)
        ex.stats.grad_rows_sent += remote
        ex.stats.bytes_sent += remote * dim * block.element_size()
    if len(routes) == 1 and routes[0].count is not None:
        route = routes[0]  # one local lookup: its rows are distinct already
        assert route.count is not None
        summed = torch.zeros_like(grads[0]).add_(grads[0])  # as sum_rows adds: 0 + g
        return Touched(route.served, repeat_last(summed, route.count), route.count)
    served = torch.cat([r.served for r in routes])
    valid = None
    if routes[0].count is not None:  # local lookups: padded, each with its count
        valid = torch.cat([slots_below(r.served.numel(), r.count, device) for r in routes])
    elif routes[0].blocks is not None:  # padded blocks: -1 where nothing was asked
        valid = served >= 0
        served = served.clamp(min=0)
    distinct = sorted_distinct(served, valid=valid, sentinel=num_rows)
    summed = sum_rows(torch.cat(grads), distinct.inverse, distinct.capacity)
    return Touched(distinct.ids, repeat_last(summed, distinct.count), distinct.count)
