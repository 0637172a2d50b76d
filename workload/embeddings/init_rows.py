"""The initial rows of a learnable embedding table: a function of (seed, node type, id) only,
never of who owns a row, so that any sharding of a table starts from the same rows."""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor

INIT_CHUNK_ROWS = 65536
"""Initial rows are drawn in chunks of this many ids, each from its own generator, so that a
row's initial value depends on (seed, node type, id) only, never on who owns it."""


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
