"""Where each learnable embedding table's shard lives (``spec.trainers.embeddingMemory``):
in GPU memory, or in pinned host memory that the GPU reads and updates in place (UVA).

A shard takes its rows and its optimizer's per-row state (fp32). Within the budget the
smallest shards stay on the GPU first, so that as many tables as fit (the small, densely hit
ones) are read at GPU speed; the rest go to the host whole.
"""

from __future__ import annotations

from collections.abc import Sequence

FP32_BYTES = 4


def shard_bytes(rows: int, dim: int, state_rows: int) -> int:
    """Bytes of one shard of ``rows`` rows of ``dim``: the rows and ``state_rows`` per-row
    optimizer tensors of the same shape (Adam 2, Adagrad 1)."""
    return rows * dim * FP32_BYTES * (1 + state_rows)


def host_shards(sizes: Sequence[int], budget: int | None) -> list[bool]:
    """For shards of ``sizes`` bytes, which stay in host memory under ``budget`` bytes of GPU
    memory (None: no cap, every shard on the GPU)."""
    on_host = [budget is not None] * len(sizes)
    if budget is None:
        return on_host
    used = 0
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        if used + sizes[i] > budget:
            break  # the rest are larger still
        on_host[i] = False
        used += sizes[i]
    return on_host
