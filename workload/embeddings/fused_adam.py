"""Row-sparse Adam in one kernel: the touched rows' moments and weights read once, written once.

:class:`~.optim.RowSparseAdam` updates a step's touched rows with about twenty tensor
operations over ``[slots, dim]`` fp32 blocks (two gathers of the moments, the moments' and
the weights' updates, and three ``index_add_`` of them back into the shard), each a pass
over the slots. On a GPU with Triton this module's kernel gives each slot a program that
loads its row's gradient, moments and weight, computes the same fp32 arithmetic in the same
order (IEEE division and square root, no fused multiply-adds) and stores the three rows back, only for the real slots (``slot < count``: the
touched rows are distinct there, so plain stores need no atomics and padding slots write
nothing). The bias-corrected step size comes from a device scalar, so that the kernel can
be captured in a CUDA graph and replayed each step.
"""

from __future__ import annotations

import os
from contextlib import nullcontext

import torch
from torch import Tensor

try:
    import triton  # type: ignore[import-untyped]
    import triton.language as tl  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - a GPU image has Triton
    triton = None

MAX_BLOCK_F = 256
"""Widest column tile of a program; wider rows take several programs per slot."""
_TRUE = ("1", "true", "on", "yes")


def fused_adam_available(weight: Tensor) -> bool:
    """Whether the kernel can update ``weight``'s rows: Triton is there and the rows are in
    a GPU's memory (not pinned host memory, which the GPU reads but the kernel's plain
    stores would write through the bus row by row), or Triton runs in its interpreter
    (``TRITON_INTERPRET``, Triton's own setting: CPU tensors, for tests)."""
    if triton is None:
        return False
    return weight.is_cuda or os.environ.get("TRITON_INTERPRET", "0").lower() in _TRUE


def fused_adam_rows(
    weight: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    rows: Tensor,
    grad: Tensor,
    count: Tensor,
    step_size: Tensor,
    *,
    betas: tuple[float, float],
    eps: float,
) -> None:
    """One Adam step, in place, for the shard rows ``rows[:count]`` (distinct) with their
    summed gradients ``grad[:count]`` (fp32, ``[slots, dim]``); ``count`` and ``step_size``
    (``lr * sqrt(1 - beta2**t) / (1 - beta1**t)``) are 0-d tensors on the rows' device.
    The slots past ``count`` change nothing."""
    if triton is None:
        raise RuntimeError("the fused row-sparse Adam needs Triton")
    slots, width = int(rows.numel()), int(weight.size(1))
    if slots == 0 or width == 0:
        return
    block_f = min(triton.next_power_of_2(width), MAX_BLOCK_F)
    grid = (slots, triton.cdiv(width, block_f))
    with torch.cuda.device(weight.device) if weight.is_cuda else nullcontext():
        _adam_rows_kernel[grid](
            weight,
            exp_avg,
            exp_avg_sq,
            rows.contiguous(),
            grad.contiguous(),
            count.reshape(1).to(torch.int64),
            step_size.reshape(1).to(torch.float32),
            width,
            1.0 - betas[0],
            1.0 - betas[1],
            eps,
            BLOCK_F=block_f,
            enable_fp_fusion=False,  # no fused multiply-adds: torch's rounding, step by step
        )


if triton is not None:

    @triton.jit  # type: ignore[untyped-decorator]
    def _adam_rows_kernel(  # type: ignore[no-untyped-def]
        w_ptr, m_ptr, v_ptr, rows_ptr, grad_ptr, count_ptr, step_ptr, width,
        one_minus_beta1, one_minus_beta2, eps,
        BLOCK_F: tl.constexpr,
    ):  # fmt: skip
        slot = tl.program_id(0)
        if slot < tl.load(count_ptr):
            cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
            mask = cols < width
            row = tl.load(rows_ptr + slot).to(tl.int64)
            at = row * width + cols
            g = tl.load(grad_ptr + slot.to(tl.int64) * width + cols, mask=mask, other=0.0)
            m = tl.load(m_ptr + at, mask=mask, other=0.0)
            v = tl.load(v_ptr + at, mask=mask, other=0.0)
            w = tl.load(w_ptr + at, mask=mask, other=0.0)
            # as RowSparseAdam._update: old + (1 - b) * (new - old), each product rounded
            avg_update = (g - m) * one_minus_beta1
            sq_update = (g * g - v) * one_minus_beta2
            m_new = avg_update + m
            v_new = sq_update + v
            denom = tl.sqrt_rn(v_new) + eps
            step_size = tl.load(step_ptr)
            w_new = w + tl.div_rn(m_new, denom) * (-step_size)
            tl.store(m_ptr + at, m_new, mask=mask)
            tl.store(v_ptr + at, v_new, mask=mask)
            tl.store(w_ptr + at, w_new, mask=mask)
