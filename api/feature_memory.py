"""The GPU budget of a holder's feature table (``samplers.featureMemory``), shared by the
runtime (runtime/holder.py load) and ``distgnn plan``: rows over it stay in pinned host
memory that the GPU reads in place.
"""

from __future__ import annotations

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
