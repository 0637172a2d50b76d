"""Neighbour aggregation over a HopBatch's target-sorted edges."""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from distgnn_workload.models.segment_reduce import segment_reduce

Aggregation = Literal["embedding_bag", "segment", "kernel", "scatter"]
"""How SAGE averages neighbours: ``embedding_bag`` (fused gather-reduce, PyTorch's backward),
``segment`` (the same forward, a transposed-CSR backward), ``kernel`` (``segment`` with both
reductions in this package's Triton kernel on a GPU, :mod:`segment_reduce`) or ``scatter``
(gather + ``index_add_``, PyG's default; kept for comparison)."""


def mean_aggregate(x: Tensor, src: Tensor, target_ptr: Tensor) -> Tensor:
    """Mean of ``x[src]`` per target, for targets whose edges are CSR-grouped by ``target_ptr``.

    One fused gather-and-reduce (``embedding_bag``): no ``[E, F]`` message tensor is
    materialised and no atomics are needed. A target with no edges gets zeros, as PyG's mean
    aggregation gives. ``src`` and ``target_ptr`` must share a dtype.
    """
    return F.embedding_bag(src, x, target_ptr, mode="mean", include_last_offset=True)


class _SegmentMean(torch.autograd.Function):
    """``mean_aggregate`` whose backward is the same fused reduce over the transposed edges.

    The gradient of source row j is the sum over its edges j -> i of ``grad[i] / deg(i)``:
    sort the edges by source once (a radix sort of E ints), then one segment sum. PyTorch's
    own embedding-bag backward sorts too but then runs several segment kernels. ``kernel``:
    both reductions in :func:`segment_reduce`'s Triton kernel (on a GPU), else
    ``embedding_bag``.
    """

    @staticmethod
    def forward(
        ctx: Any, x: Tensor, src: Tensor, target_ptr: Tensor, dst: Tensor, kernel: bool | None
    ) -> Tensor:
        ctx.save_for_backward(src, target_ptr, dst)
        ctx.num_src = x.size(0)
        ctx.kernel = kernel
        return segment_reduce(x, src, target_ptr, mean=True, kernel=kernel)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, None, None, None, None]:
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        src, target_ptr, dst = ctx.saved_tensors
        degree = (target_ptr[1:] - target_ptr[:-1]).clamp_(min=1)
        scaled = grad / degree.unsqueeze(1).to(grad.dtype)
        src_sorted, order = torch.sort(src)
        src_ptr = torch.searchsorted(
            src_sorted, torch.arange(ctx.num_src + 1, dtype=src.dtype, device=src.device)
        )
        grad_x = segment_reduce(scaled, dst[order], src_ptr, mean=False, kernel=ctx.kernel)
        return grad_x, None, None, None, None


def mean_aggregate_segment(
    x: Tensor, src: Tensor, target_ptr: Tensor, dst: Tensor, *, kernel: bool | None = False
) -> Tensor:
    """``mean_aggregate`` with a transposed-CSR backward (see ``_SegmentMean``); ``kernel``
    as :func:`segment_reduce` takes it (None: the Triton kernel where it runs)."""
    out: Tensor = _SegmentMean.apply(x, src, target_ptr, dst, kernel)
    return out


def mean_aggregate_scatter(x: Tensor, src: Tensor, dst: Tensor, num_dst: int) -> Tensor:
    """The same mean through gather + ``index_add_`` (PyG's default path); for comparison."""
    out = torch.zeros(num_dst, x.size(1), dtype=x.dtype, device=x.device)
    out.index_add_(0, dst, x.index_select(0, src))
    count = torch.bincount(dst, minlength=num_dst).clamp_(min=1).to(x.dtype)
    return out / count.unsqueeze(1)


def aggregate(
    x: Tensor, src: Tensor, dst: Tensor, target_ptr: Tensor, num_dst: int, how: Aggregation
) -> Tensor:
    """The mean of ``x[src]`` per target (``num_dst`` rows) the way ``how`` names."""
    if how == "embedding_bag":
        return mean_aggregate(x, src, target_ptr)
    if how == "segment":
        return mean_aggregate_segment(x, src, target_ptr, dst)
    if how == "kernel":
        return mean_aggregate_segment(x, src, target_ptr, dst, kernel=None)
    return mean_aggregate_scatter(x, src, dst, num_dst)
