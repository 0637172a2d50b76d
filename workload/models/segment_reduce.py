"""Gather-and-reduce over CSR segments: ``out[i] = reduce_{e in ptr[i]:ptr[i+1]} x[index[e]]``.

The mean of a target's sampled neighbours (SAGE's aggregation) and the sum of a source's
edge gradients (its backward over the transposed edges) are both this one operation.
PyTorch's ``embedding_bag`` computes it with one thread per (bag, feature) over a grid of
1,024 blocks, walking each bag's rows one dependent load at a time; on a GPU this module's
Triton kernel gives each segment a program that loads ``BLOCK_E`` of its rows at once, as
``[BLOCK_E, BLOCK_F]`` tiles, and sums them in fp32. Elsewhere (or without Triton) it is
``embedding_bag``. A segment with no entries gives zeros, in both.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor

try:
    import triton  # type: ignore[import-untyped]
    import triton.language as tl  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - a GPU image has Triton
    triton = None

BLOCK_E = 16
"""Rows of a segment one program loads at once."""
MAX_BLOCK_F = 256
"""Widest feature tile of a program; wider rows take several programs per segment."""


def triton_available() -> bool:
    return triton is not None


def segment_reduce(
    x: Tensor, index: Tensor, ptr: Tensor, *, mean: bool, kernel: bool | None = None
) -> Tensor:
    """``[ptr.numel() - 1, F]``: per segment the sum (or, with ``mean``, the mean) of
    ``x[index[ptr[i]:ptr[i + 1]]]``.

    ``kernel``: the Triton kernel (None: where ``x`` is on a GPU and Triton is there); its
    accumulation is fp32 whatever ``x``'s dtype. ``index`` and ``ptr`` share a dtype.
    """
    use_kernel = (x.is_cuda and triton is not None) if kernel is None else kernel
    if not use_kernel:
        return F.embedding_bag(
            index, x, ptr, mode="mean" if mean else "sum", include_last_offset=True
        )
    if triton is None:
        raise RuntimeError("the segment-reduce kernel needs Triton")
    rows, width = int(ptr.numel()) - 1, int(x.size(1))
    out = torch.empty((rows, width), dtype=x.dtype, device=x.device)
    if rows == 0 or width == 0:
        return out
    x = x.contiguous()
    block_f = min(triton.next_power_of_2(width), MAX_BLOCK_F)
    grid = (rows, triton.cdiv(width, block_f))
    with torch.cuda.device(x.device) if x.is_cuda else nullcontext():
        _segment_reduce_kernel[grid](
            x,
            index.contiguous(),
            ptr.contiguous(),
            out,
            width,
            MEAN=mean,
            BLOCK_E=BLOCK_E,
            BLOCK_F=block_f,
        )
    return out


if triton is not None:

    @triton.jit  # type: ignore[untyped-decorator]
    def _segment_reduce_kernel(  # type: ignore[no-untyped-def]
        x_ptr, index_ptr, ptr_ptr, out_ptr, width,
        MEAN: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr,
    ):  # fmt: skip
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
        cmask = cols < width
        start = tl.load(ptr_ptr + row).to(tl.int64)
        end = tl.load(ptr_ptr + row + 1).to(tl.int64)
        acc = tl.zeros([BLOCK_F], dtype=tl.float32)
        for e0 in range(start, end, BLOCK_E):
            e = e0 + tl.arange(0, BLOCK_E)
            emask = e < end
            src = tl.load(index_ptr + e, mask=emask, other=0).to(tl.int64)
            tile = tl.load(
                x_ptr + src[:, None] * width + cols[None, :],
                mask=emask[:, None] & cmask[None, :],
                other=0.0,
            )
            acc += tl.sum(tile.to(tl.float32), axis=0)
        if MEAN:
            acc = acc / tl.maximum(end - start, 1).to(tl.float32)
        out = out_ptr + row.to(tl.int64) * width + cols
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=cmask)
