"""Where every relation's entries of one static-shape hop lie when the hop runs as one.

The static execution (:mod:`~distgnn_workload.sampling.static_sample`) draws each relation's
neighbours apart, then relabels, compacts and writes all relations of a hop together: their
draws laid end to end, grouped by source node type, so that a node type's new nodes are
numbered in one pass (in order of first appearance, as relation after relation would
number them). The outputs of every node type, and of every edge type, are regions of one
buffer each (:class:`Regions`). The layout depends only on the caps and fanouts, so its
index tensors are made once, outside any CUDA graph capture, and kept with the graph
(:func:`hop_consts`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Regions(Generic[K]):
    """Named regions laid end to end in one buffer, each ``size[k] + 1`` slots (the last its
    dump slot, as a buffer of its own had), then one shared dump slot at the end."""

    start: dict[K, int]
    size: dict[K, int]

    @classmethod
    def of(cls, sizes: Mapping[K, int]) -> Regions[K]:
        start, at = {}, 0
        for k, n in sizes.items():
            start[k], at = at, at + n + 1
        return cls(start, dict(sizes))

    @property
    def dump(self) -> int:
        """The shared dump slot: every write past a cap or of an invalid entry goes here."""
        return sum(n + 1 for n in self.size.values())

    def buffer(self, fills: Mapping[K, int], device: torch.device) -> Tensor:
        """An int64 buffer of every region, each filled with ``fills[k]``, and the dump."""
        out = torch.empty(self.dump + 1, dtype=torch.int64, device=device)
        for k, n in self.size.items():
            out[self.start[k] : self.start[k] + n + 1].fill_(fills[k])
        out[self.dump :].fill_(0)
        return out

    def views(self, buffer: Tensor) -> dict[K, Tensor]:
        return {k: buffer[self.start[k] : self.start[k] + n + 1] for k, n in self.size.items()}


@dataclass(frozen=True)
class HopLayout:
    """One hop's entries: the relations that draw (``order``: grouped by source type, in
    edge-type order within a type), each ``rows x fanout`` entries, and the relations whose
    target rows get offsets (``ptr_relations``: every relation into a type present at the
    hop, drawing or not), each ``rows`` entries."""

    order: tuple[EdgeType, ...]
    fanout: tuple[int, ...]
    rows: tuple[int, ...]
    """Target rows of each relation of ``order`` (its destination type's cap at the hop)."""
    ptr_relations: tuple[EdgeType, ...]
    ptr_rows: tuple[int, ...]
    source_types: tuple[str, ...]
    """The source types of ``order``, each once, in its order."""

    @classmethod
    def of(
        cls,
        edge_types: Sequence[EdgeType],
        node_types: Sequence[str],
        fanouts: Mapping[EdgeType, Sequence[int]],
        node_caps: Mapping[str, Sequence[int]],
        hop: int,
    ) -> HopLayout:
        ptr = [et for et in edge_types if node_caps[et[2]][hop] > 0]
        drawing = [et for et in ptr if fanouts[et][hop] > 0]
        rank = {t: i for i, t in enumerate(node_types)}
        order = sorted(drawing, key=lambda et: rank[et[0]])  # stable: edge-type order within
        return cls(
            order=tuple(order),
            fanout=tuple(fanouts[et][hop] for et in order),
            rows=tuple(node_caps[et[2]][hop] for et in order),
            ptr_relations=tuple(ptr),
            ptr_rows=tuple(node_caps[et[2]][hop] for et in ptr),
            source_types=tuple(dict.fromkeys(et[0] for et in order)),
        )

    @property
    def entries(self) -> tuple[int, ...]:
        return tuple(r * k for r, k in zip(self.rows, self.fanout, strict=True))


@dataclass(frozen=True)
class Bounds:
    """Positions in a hop's entries (or rows), made to read an inclusive cumulative sum just
    before each of them with no copy of the sum: ``last`` the position before, ``inside``
    whether there is one (the sum before position 0 is 0)."""

    at: Tensor
    last: Tensor
    inside: Tensor

    @classmethod
    def of(cls, at: Tensor) -> Bounds:
        return cls(at, (at - 1).clamp(min=0), at > 0)

    def before(self, cumulative: Tensor) -> Tensor:
        """``cumulative``'s value just before each position (its total over the entries
        before it)."""
        return torch.where(self.inside, cumulative[self.last], 0)


@dataclass(frozen=True)
class HopConsts:
    """A hop layout's index tensors on the device (made once per layout)."""

    entry_relation: Tensor
    """Per entry: its relation's position in ``order``."""
    entry_row: Tensor
    """Per entry: its target row within its relation."""
    type_bounds: Bounds
    """Per source type of ``order``: where its entries start, then where they end."""
    relation_bounds: Bounds
    """Per relation of ``order``: where its entries start, then where they end."""
    row_relation: Tensor
    """Per target row of ``ptr_relations``: its relation's position there."""
    row_index: Tensor
    """Per target row: its row within its relation."""
    row_bounds: Bounds
    """Per relation of ``ptr_relations``: where its rows start."""
    relation_type: Tensor
    """Per relation of ``order``: its source type's position in ``source_types``."""


def _bounds(sizes: Sequence[int]) -> tuple[list[int], list[int]]:
    starts, ends, at = [], [], 0
    for n in sizes:
        starts.append(at)
        at += n
        ends.append(at)
    return starts, ends


def _repeat(sizes: Sequence[int]) -> Tensor:
    """Position i repeated ``sizes[i]`` times (on the host)."""
    return torch.repeat_interleave(
        torch.arange(len(sizes)), torch.tensor(list(sizes), dtype=torch.int64)
    )


def _within(sizes: Sequence[int], per: Sequence[int]) -> Tensor:
    """For each entry of segments of ``sizes``: its index in its segment over ``per``."""
    if not sizes:
        return torch.zeros(0, dtype=torch.int64)
    return torch.cat([torch.arange(n) // k for n, k in zip(sizes, per, strict=True)])


Consts = MutableMapping[Hashable, object]
"""Where a sampler keeps the index tensors of its hops between runs (and its graphs' lives)."""


def device_ints(values: Sequence[int], device: torch.device, cache: Consts | None) -> Tensor:
    """``values`` as an int64 tensor on ``device``, from ``cache`` where it holds them."""
    key = ("ints", tuple(values), str(device))
    if cache is not None and key in cache:
        found = cache[key]
        assert isinstance(found, Tensor)
        return found
    out = torch.tensor(list(values), dtype=torch.int64).to(device)
    if cache is not None:
        cache[key] = out
    return out


def hop_consts(layout: HopLayout, device: torch.device, cache: Consts | None) -> HopConsts:
    """The layout's index tensors, from ``cache`` where it holds them (a capture must find
    them there: the warm-up run before it makes them; making them copies from the host)."""
    key = (layout, str(device))
    if cache is not None and key in cache:
        found = cache[key]
        assert isinstance(found, HopConsts)
        return found
    entries = layout.entries
    e_start, e_end = _bounds(entries)
    type_of = [layout.source_types.index(et[0]) for et in layout.order]
    # ``order`` is grouped by source type: a type's entries are one run
    t_start, t_end = _bounds(
        [sum(n for n, t in zip(entries, type_of, strict=True) if t == i)
         for i in range(len(layout.source_types))]
    )  # fmt: skip
    p_start, _ = _bounds(layout.ptr_rows)

    def ints(values: Sequence[int] | Tensor) -> Tensor:
        host = values if isinstance(values, Tensor) else torch.tensor(list(values))
        return host.to(device=device, dtype=torch.int64)

    consts = HopConsts(
        entry_relation=ints(_repeat(entries)),
        entry_row=ints(_within(entries, layout.fanout)),
        type_bounds=Bounds.of(ints(t_start + t_end)),
        relation_bounds=Bounds.of(ints(e_start + e_end)),
        row_relation=ints(_repeat(layout.ptr_rows)),
        row_index=ints(_within(layout.ptr_rows, [1] * len(layout.ptr_rows))),
        row_bounds=Bounds.of(ints(p_start)),
        relation_type=ints(type_of),
    )
    if cache is not None:
        cache[key] = consts
    return consts
