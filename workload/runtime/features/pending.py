"""A gather whose remote rows are still on their way (:class:`PendingGather`), and the
counts a feature source keeps for the cache metrics (:class:`FeatureStats`).

A pipeline starts a batch's gather (the rows at hand now, the others asked of their owners
over the feature exchange, RPC or shared slots) and waits for it when the batch is due:
:meth:`PendingGather.wait` fills the remote rows in where they belong.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future as Started
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.futures import Future

from distgnn_workload.runtime.features.exchange import PendingRows
from distgnn_workload.runtime.rpc import wait_remote
from distgnn_workload.runtime.shared_slots import SlotReader, take


@dataclass
class FeatureStats:
    """Counts for the cache metrics, kept on the device until read."""

    lookups: Tensor
    """Remote-node look-ups."""
    misses: int = 0
    """Look-ups the cache could not serve (fetched from their owners)."""
    bytes_fetched: int = 0
    total_bytes: int = 0
    """Bytes of rows fetched since the start (never reset)."""
    gathered: Tensor | None = None
    """Rows a tiered table gathered (on the device)..."""
    host_tier: Tensor | None = None
    """... and those of them read from its pinned host tier."""

    def take(self) -> tuple[int, int, int]:
        """(lookups, hits, bytes) since the last call; one host sync."""
        lookups = int(self.lookups.item())
        out = (lookups, max(lookups - self.misses, 0), self.bytes_fetched)
        self.lookups.zero_()
        self.misses = 0
        self.bytes_fetched = 0
        return out

    def count_tiers(self, slot: Tensor, split: int) -> None:
        """Count a tiered table's gather of ``slot``: rows, and rows from the host tier."""
        if self.gathered is None or self.host_tier is None:
            self.gathered = torch.zeros((), dtype=torch.int64, device=slot.device)
            self.host_tier = torch.zeros((), dtype=torch.int64, device=slot.device)
        self.gathered += (slot >= 0).sum()
        self.host_tier += (slot >= split).sum()

    def take_tiers(self) -> tuple[int, int]:
        """(rows gathered, rows from the host tier) since the last call; one host sync."""
        if self.gathered is None or self.host_tier is None:
            return 0, 0
        out = int(self.gathered.item()), int(self.host_tier.item())
        self.gathered.zero_()
        self.host_tier.zero_()
        return out


@dataclass
class RemotePart:
    """One holder's share of a pending gather."""

    pos: Tensor
    """Where its rows go in ``out``."""
    fut: Future[Any]
    """Its rows, or (with a shared slot) how many rows it wrote there."""
    peer: str
    reader: SlotReader | None = None
    slot: int = -1


@dataclass
class PendingGather:
    """A gather whose remote rows are still on their way: ``wait()`` fills them in.

    ``out`` already holds the local and cached rows; ``parts`` say, per owning holder, where
    its rows go in ``out`` and how they come (over RPC, or written into a shared slot).
    """

    out: Tensor
    parts: list[RemotePart] = field(default_factory=list)
    exchanged: tuple[Tensor, Started[tuple[PendingRows, bool]]] | None = None
    """Where the rows of a feature-exchange round go in ``out`` (the first as many as it
    brings), and the round, started."""
    on_exchanged: Callable[[int], None] | None = None
    """Told how many rows the round brought."""

    def wait(self) -> Tensor:
        if self.exchanged is not None:
            pos, started = self.exchanged
            pending, _ = started.result()
            rows = pending.wait()
            if self.on_exchanged is not None:
                self.on_exchanged(int(rows.size(0)))
            self.out.index_copy_(0, pos[: rows.size(0)], rows)
            self.exchanged = None
        for part in self.parts:
            value = wait_remote(part.fut, part.peer)
            if part.reader is None:
                rows = value
            else:
                rows = take(part.reader.buffers(part.slot)["rows"][: int(value)], self.out.device)
            self.out[part.pos] = rows.to(self.out.device, self.out.dtype, non_blocking=True)
            if part.reader is not None:
                part.reader.release(part.slot)  # once the copy above has run
        self.parts = []
        return self.out
