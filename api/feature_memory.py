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


def feature_budget(value: int | str | None, free: int, total: int, other: int = 0) -> int | None:
    """Bytes of the feature table the GPU may hold, or None for no cap.

    ``free``/``total``: the card's free and total memory; ``other``: what the holder will
    still put on it besides the table (a replicated topology).
    """
    if value is None:
        return None
    if value == AUTO:
        reserve = max(AUTO_RESERVE_MIN, int(AUTO_RESERVE_SHARE * total))
        return max(0, free - other - reserve)
    parsed = parse_quantity(value)
    if parsed is None or parsed < 0:
        raise ValueError(f"spec.samplers.featureMemory {value!r} is not 'auto' or a quantity")
    return int(parsed)


def table_split(budget: int | None, table_bytes: int) -> tuple[int, int]:
    """(GPU bytes, host bytes) of a table of ``table_bytes`` under ``budget``: within the
    budget it is all on the GPU; over it the host tier holds every row and the GPU the
    hottest, up to the budget."""
    if budget is None or table_bytes <= budget:
        return table_bytes, 0
    return budget, table_bytes
