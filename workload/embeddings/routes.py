"""What a lookup of a :class:`~.table.ShardedEmbedding` leaves for its backward and update:
the route of its distinct ids, the autograd function that keeps their gradients, a
multi-rank lookup waiting for its counts, and the touched rows a step hands the optimizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.embeddings.distinct import Distinct
from distgnn_workload.embeddings.exchange import sum_rows


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
