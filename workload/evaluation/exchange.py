"""The exchange between layers: every rank's share of a layer's output, readable by all.

After layer ``l`` each rank holds the rows of its share. They are all-gathered over the
trainers' process group (NCCL on GPUs, gloo on CPU) in row chunks into one buffer per rank,
laid out rank by rank and padded to the largest share, so no rows are copied to compact
it: a node's row sits at ``id + shift[rank of id]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

DEFAULT_EXCHANGE_ROWS = 1 << 18
"""Rows per rank in one all-gather call: bounds the staging buffer when rows go to the host."""


class LayerRows:
    """One layer's output for every node, gathered from the ranks' shares."""

    def __init__(self, buffer: Tensor, bounds: Tensor, shift: Tensor, device: torch.device):
        self.buffer = buffer
        self.bounds = bounds
        self.shift = shift
        self.device = device

    def rows(self, ids: Tensor) -> Tensor:
        """The rows of the global node ids ``ids`` (on any device), on the compute device."""
        ids = ids.to(self.bounds.device)
        rank = torch.searchsorted(self.bounds, ids, right=True) - 1
        pos = ids + self.shift[rank]
        if self.buffer.device == pos.device:
            return self.buffer.index_select(0, pos)
        return self.buffer.index_select(0, pos.to(self.buffer.device)).to(self.device)


def exchange(
    local: Tensor,
    shares: Sequence[tuple[int, int]],
    rank: int,
    *,
    group: dist.ProcessGroup | None = None,
    on_host: bool = False,
    chunk_rows: int = DEFAULT_EXCHANGE_ROWS,
) -> LayerRows:
    """All-gather every rank's ``local`` rows (its share of the layer) into a
    :class:`LayerRows`; ``on_host`` keeps the gathered rows in host memory."""
    device = local.device
    world = len(shares)
    lo, hi = shares[rank]
    if local.size(0) != hi - lo:
        raise ValueError(f"rank {rank} has {local.size(0)} rows for its share [{lo}, {hi})")
    starts = torch.tensor([a for a, _ in shares], dtype=torch.int64, device=device)
    bounds = torch.cat([starts, torch.tensor([shares[-1][1]], device=device)])
    if world == 1:
        buffer = local.cpu() if on_host else local
        return LayerRows(buffer, bounds, torch.zeros(2, dtype=torch.int64, device=device), device)
    longest = max(b - a for a, b in shares)
    shift = torch.arange(world, device=device, dtype=torch.int64) * longest - starts
    shift = torch.cat([shift, shift[-1:]])
    width = local.size(1)
    target = torch.device("cpu") if on_host else device
    buffer = torch.empty((world * longest, width), dtype=local.dtype, device=target)
    step = max(1, chunk_rows)
    for a in range(0, longest, step):
        n = min(step, longest - a)
        piece = local[a : a + n]
        if piece.size(0) < n:  # this rank's share is shorter than the longest: pad
            piece = torch.cat([piece, piece.new_zeros(n - piece.size(0), width)])
        if target == device:
            views = [buffer[r * longest + a : r * longest + a + n] for r in range(world)]
            dist.all_gather(views, piece.contiguous(), group=group)
        else:
            staging = [torch.empty_like(piece) for _ in range(world)]
            dist.all_gather(staging, piece.contiguous(), group=group)
            for r, got in enumerate(staging):
                buffer[r * longest + a : r * longest + a + n].copy_(got)
    return LayerRows(buffer, bounds, shift, device)
