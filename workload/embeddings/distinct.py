"""Distinct ids at a fixed capacity: ``torch.unique`` without reading a size back.

``torch.unique`` sizes its output by the number of distinct ids, which a GPU must copy back
to the host (a blocking device-to-host copy per call). :func:`sorted_distinct` keeps the
input's size instead: a stable sort, a flag where the sorted ids change, and a cumulative
sum give every id its slot; the distinct ids fill a prefix of the output, in increasing
order as ``torch.unique`` returns them, and their number stays on the device (``count``).
The slots past it repeat the last distinct id (:func:`repeat_last`), so that a padded
update of "all slots" writes each row with one value, whichever of its duplicates lands.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Distinct:
    """The distinct ids of ``n`` ids (fixed size ``n``) and where each id went.

    ``ids[:count]`` are the distinct valid ids, increasing; ``ids[count:]`` repeat
    ``ids[count - 1]`` (all ``fill`` when ``count`` is 0). ``inverse[i]`` is the slot of the
    ``i``-th input id (a slot past ``count`` for an id that was not valid). ``count`` is a
    0-d int64 tensor on the ids' device.
    """

    ids: Tensor
    inverse: Tensor
    count: Tensor

    @property
    def capacity(self) -> int:
        return self.ids.numel()

    def valid(self) -> Tensor:
        """``slot < count`` per slot (bool, on the device)."""
        return torch.arange(self.capacity, device=self.ids.device) < self.count


def sorted_distinct(
    ids: Tensor, *, valid: Tensor | None = None, sentinel: int = 0, fill: int = 0
) -> Distinct:
    """The distinct values of the 1-D int64 ``ids`` (those where ``valid``, if given).

    Invalid ids are replaced by ``sentinel + i`` (``i`` their position), ``sentinel`` larger
    than every valid id (e.g. the table's row count): they sort after the valid ones, each
    into a slot of its own past ``count``. (One slot for all of them would serialise a
    deterministic sum into it: a padded batch holds many.) No host sync on any device.
    """
    n = ids.numel()
    dev = ids.device
    if valid is None:
        keys = ids
    else:
        keys = torch.where(valid, ids, torch.arange(sentinel, sentinel + n, device=dev))
    if n == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        return Distinct(empty, empty, torch.zeros((), dtype=torch.int64, device=dev))
    ordered, order = torch.sort(keys, stable=True)
    new = torch.ones(n, dtype=torch.bool, device=dev)
    new[1:] = ordered[1:] != ordered[:-1]
    slot = torch.cumsum(new, 0) - 1
    inverse = torch.empty_like(slot).scatter_(0, order, slot)
    firsts = new if valid is None else new & (ordered < sentinel)
    count = firsts.sum()
    # every id that is not a first goes to the last slot, which is a distinct id's only
    # when all n are distinct (then no other write goes there); else repeat_last rewrites it
    packed = torch.full_like(ordered, fill).scatter_(0, torch.where(firsts, slot, n - 1), ordered)
    return Distinct(repeat_last(packed, count, fill=fill), inverse, count)


def repeat_last(values: Tensor, count: Tensor, *, fill: float | int = 0) -> Tensor:
    """``values`` with rows ``count..`` replaced by row ``count - 1`` (``fill`` if count is 0)."""
    n = values.size(0)
    if n == 0:
        return values
    pos = torch.minimum(torch.arange(n, device=values.device), (count - 1).clamp(min=0))
    out = values.index_select(0, pos)
    if values.dim() == 1:
        return torch.where(count > 0, out, fill)
    return torch.where(count > 0, out, torch.full_like(out, fill))


def owner_blocks(owner: Tensor, world: int, block: int) -> tuple[Tensor, Tensor]:
    """Where each slot goes in blocks of ``block`` slots sent to ``world`` ranks:
    ``owner * block + position``, its position the slot's rank among the slots of the same
    owner (in slot order). ``owner`` may be ``world`` (a block past the last, not sent); so
    goes a slot whose position is ``block`` or more (its owner's block is full: the caller
    checks that none is, see :meth:`~.table.ShardedEmbedding.lookup_padded`). Also the
    slots per owner (``world + 1`` counts). No host sync."""
    slots = torch.arange(owner.numel(), device=owner.device)
    order = torch.argsort(owner, stable=True)
    per_owner = torch.zeros(world + 1, dtype=torch.int64, device=owner.device)
    per_owner.scatter_add_(0, owner, torch.ones_like(owner))
    first = torch.cumsum(per_owner, 0) - per_owner
    position = torch.empty_like(order).scatter_(0, order, slots - first[owner[order]])
    place = torch.where(position < block, owner * block + position, world * block)
    return place, per_owner


def slots_below(capacity: int, count: Tensor | None, device: torch.device) -> Tensor:
    """``slot < count`` for ``capacity`` slots (all of them without a count)."""
    slots = torch.arange(capacity, device=device)
    return slots < count if count is not None else torch.ones_like(slots, dtype=torch.bool)
