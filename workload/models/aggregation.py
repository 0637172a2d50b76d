"""Neighbour aggregation over a HopBatch's target-sorted edges."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def mean_aggregate(x: Tensor, src: Tensor, target_ptr: Tensor) -> Tensor:
    """Mean of ``x[src]`` per target, for targets whose edges are CSR-grouped by ``target_ptr``.

    One fused gather-and-reduce (``embedding_bag``): no ``[E, F]`` message tensor is
    materialised and no atomics are needed. A target with no edges gets zeros, as PyG's mean
    aggregation gives. ``src`` and ``target_ptr`` must share a dtype.
    """
    return F.embedding_bag(src, x, target_ptr, mode="mean", include_last_offset=True)


def mean_aggregate_scatter(x: Tensor, src: Tensor, dst: Tensor, num_dst: int) -> Tensor:
    """The same mean through gather + ``index_add_`` (PyG's default path); for comparison."""
    out = torch.zeros(num_dst, x.size(1), dtype=x.dtype, device=x.device)
    out.index_add_(0, dst, x.index_select(0, src))
    count = torch.bincount(dst, minlength=num_dst).clamp_(min=1).to(x.dtype)
    return out / count.unsqueeze(1)
