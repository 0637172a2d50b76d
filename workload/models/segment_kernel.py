"""A Triton kernel for the gather-and-reduce of CSR-grouped rows, used on the GPU.

``segment_reduce(x, index, ptr)`` returns, for every segment ``i``, the sum (or the mean)
of ``x[index[e]]`` over ``ptr[i] <= e < ptr[i + 1]``: the neighbour mean of a sampled
layer (segments = targets, ``index`` = their sources) and, over the transposed edges, its
gradient. PyTorch's ``embedding_bag`` kernel does the same with one thread per feature
walking the bag's rows one after another; this one loads a tile of up to ``BLOCK_E`` rows
of the segment at once, accumulates in fp32 and writes the output once. It is used inside
the captured CUDA-graph step like any other kernel (Triton compiles it on the eager warm-up
steps that precede the capture).

Triton ships with PyTorch's CUDA wheels. Where it is missing, or the tensors are on the
CPU, :func:`available` is False and callers use ``embedding_bag``. ``DISTGNN_SEGMENT_KERNEL``
set to ``torch`` forces that fallback on the GPU too (for comparison).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch
from torch import Tensor

KERNEL_ENV = "DISTGNN_SEGMENT_KERNEL"
"""``triton`` (the default where it can run) or ``torch`` (``embedding_bag``)."""


@functools.cache
def _kernel() -> Any:
    """The jitted kernel, or None where Triton cannot be imported."""
    try:
        import triton
        import triton.language as tl
    except ImportError:  # pragma: no cover - CPU images without triton
        return None

    @triton.jit  # type: ignore[misc]
    def segment_reduce_kernel(  # type: ignore[no-untyped-def]
        x_ptr,
        index_ptr,
        seg_ptr,
        out_ptr,
        num_features,
        stride_x,
        stride_out,
        MEAN: tl.constexpr,
        BLOCK_E: tl.constexpr,
        BLOCK_F: tl.constexpr,
    ):
        segment = tl.program_id(0)
        features = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        feature_mask = features < num_features
        start = tl.load(seg_ptr + segment).to(tl.int64)
        end = tl.load(seg_ptr + segment + 1).to(tl.int64)
        acc = tl.zeros([BLOCK_F], dtype=tl.float32)
        for first in range(start, end, BLOCK_E):
            edges = first + tl.arange(0, BLOCK_E)
            edge_mask = edges < end
            rows = tl.load(index_ptr + edges, mask=edge_mask, other=0).to(tl.int64)
            tile = tl.load(
                x_ptr + rows[:, None] * stride_x + features[None, :],
                mask=edge_mask[:, None] & feature_mask[None, :],
                other=0.0,
            )
            acc += tl.sum(tile.to(tl.float32), axis=0)
        if MEAN:
            acc = acc / tl.maximum((end - start).to(tl.float32), 1.0)
        tl.store(
            out_ptr + segment.to(tl.int64) * stride_out + features,
            acc.to(out_ptr.dtype.element_ty),
            mask=feature_mask,
        )

    return segment_reduce_kernel


def available(x: Tensor) -> bool:
    """Whether :func:`segment_reduce` runs for ``x``: on a CUDA tensor, with Triton, unless
    ``DISTGNN_SEGMENT_KERNEL=torch`` (or the interpreter, for tests on the CPU)."""
    choice = os.environ.get(KERNEL_ENV, "triton")
    if choice == "torch":
        return False
    if choice != "triton":
        raise ValueError(f"{KERNEL_ENV}={choice!r}: use triton or torch")
    on_device = x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"
    return on_device and _kernel() is not None


def _block_sizes(num_features: int, itemsize: int) -> tuple[int, int, int]:
    """(BLOCK_E, BLOCK_F, num_warps): a feature block of up to 256 columns (a whole
    row of the usual widths), 16 rows at a time (sampled fanouts are mostly <= 16)."""
    block_f = min(256, max(16, 1 << (num_features - 1).bit_length()))
    block_e = 16 if block_f * itemsize <= 512 else 8
    warps = 4 if block_f * block_e >= 2048 else 2
    return block_e, block_f, warps


def segment_reduce(x: Tensor, index: Tensor, ptr: Tensor, *, mean: bool) -> Tensor:
    """``out[i] = sum or mean of x[index[ptr[i]:ptr[i+1]]]``; empty segments give zeros.

    ``x`` is ``[N, F]`` with unit stride along features; the result has ``x``'s dtype.
    """
    if x.dim() != 2 or x.stride(1) != 1:
        x = x.contiguous()
    segments = ptr.numel() - 1
    out = torch.empty(segments, x.size(1), dtype=x.dtype, device=x.device)
    if segments == 0 or x.size(1) == 0:
        return out.zero_()
    block_e, block_f, warps = _block_sizes(x.size(1), x.element_size())
    grid = (segments, -(-x.size(1) // block_f))
    _kernel()[grid](
        x,
        index,
        ptr,
        out,
        x.size(1),
        x.stride(0),
        out.stride(0),
        MEAN=mean,
        BLOCK_E=block_e,
        BLOCK_F=block_f,
        num_warps=warps,
    )
    return out
