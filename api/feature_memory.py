"""GPU budgets and what goes where under them, one rule each for the runtime and ``distgnn
plan``: a holder's feature table (``samplers.featureMemory``; runtime/holder.py load, typed
holders share it among their featured node types) and a training process's shards of the
learnable embeddings (``trainers.embeddingMemory``; embeddings/placement.py). Rows and
shards over a budget stay in pinned host memory that the GPU reads in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from distgnn_api.kube import AUTO, parse_quantity

GIB = 1 << 30
AUTO_RESERVE_SHARE = 0.25
"""``auto`` leaves this share of the card (at least :data:`AUTO_RESERVE_MIN`) to training:
model, optimizer, activations, prefetched batches, the exchange's buffers."""
AUTO_RESERVE_MIN = 4 * GIB
HOST_ROW_ALIGN = 128
"""Bytes each host-tier row starts at a multiple of (its stride padded to it). A GPU reads host
memory over PCIe in requests of at most 128 aligned bytes: a 200-byte row (100 bf16 values)
at any offset takes three, aligned two."""


def host_row_bytes(row_bytes: int) -> int:
    """The stride of a host-tier row of ``row_bytes``: padded to :data:`HOST_ROW_ALIGN`."""
    return -(-max(row_bytes, 1) // HOST_ROW_ALIGN) * HOST_ROW_ALIGN


def feature_budget(
    value: int | str | None,
    free: int,
    total: int,
    other: int = 0,
    *,
    field: str = "spec.samplers.featureMemory",
) -> int | None:
    """Bytes of the feature table the GPU may hold, or None for no cap.

    ``free``/``total``: the card's free and total memory; ``other``: what the holder will
    still put on it besides the table (a replicated topology). The same rule sizes the
    learnable embeddings' budget (``field`` spec.trainers.embeddingMemory).
    """
    if value is None:
        return None
    if value == AUTO:
        reserve = max(AUTO_RESERVE_MIN, int(AUTO_RESERVE_SHARE * total))
        return max(0, free - other - reserve)
    parsed = parse_quantity(value)
    if parsed is None or parsed < 0:
        raise ValueError(f"{field} {value!r} is not 'auto' or a quantity")
    return int(parsed)


def table_split(budget: int | None, rows: int, row_bytes: int) -> tuple[int, int]:
    """(GPU bytes, host bytes) of a table of ``rows`` rows under ``budget``: within the
    budget it is all on the GPU; over it the host tier holds every row (each padded,
    :func:`host_row_bytes`) and the GPU the hottest, up to the budget."""
    table = rows * row_bytes
    if budget is None or table <= budget:
        return table, 0
    return budget // row_bytes * row_bytes, rows * host_row_bytes(row_bytes)


def shared_budgets(budget: int | None, tables: Mapping[str, int]) -> dict[str, int | None]:
    """Each table's share of ``budget`` (None: no cap), in proportion to its bytes: a typed
    holder's featured node types (runtime/features/cache_policy.py load_typed_tables)."""
    total = max(sum(tables.values()), 1)
    return {t: None if budget is None else budget * size // total for t, size in tables.items()}


# --------------------------------------------------------------------------- embeddings

FP32_BYTES = 4
ADAM_STATE_ROWS = 2
"""Per-row state tensors of the embeddings' optimizer (embeddings/optim.py RowSparseAdam:
its two moments)."""


def shard_bytes(rows: int, dim: int, state_rows: int) -> int:
    """Bytes of one embedding shard of ``rows`` rows of ``dim`` on the GPU: the rows and
    ``state_rows`` per-row optimizer tensors of the same shape (Adam 2, Adagrad 1), fp32."""
    return rows * dim * FP32_BYTES * (1 + state_rows)


def host_shard_bytes(rows: int, dim: int, state_rows: int) -> int:
    """The same shard in pinned host memory: each of its tensors in rows padded to
    :data:`HOST_ROW_ALIGN` (runtime/features/tiers.py pinned_rows)."""
    return rows * host_row_bytes(dim * FP32_BYTES) * (1 + state_rows)


def host_shards(sizes: Sequence[int], budget: int | None) -> list[bool]:
    """For shards of ``sizes`` bytes, which stay in host memory under ``budget`` bytes of GPU
    memory (None: no cap, every shard on the GPU): the smallest stay on the GPU first, so
    that as many tables as fit (the small, densely hit ones) are read at GPU speed; the rest
    go to the host whole."""
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
