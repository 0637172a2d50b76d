"""Run as a script under ``TRITON_INTERPRET=1``: the segment-reduce Triton kernel on CPU
tensors (Triton's interpreter) against a plain loop, forward and backward. Exits non-zero
with the first difference."""

from __future__ import annotations

import torch

from distgnn_workload.models.aggregation import mean_aggregate_segment
from distgnn_workload.models.segment_reduce import segment_reduce
from tests.support.interpreted import check_main


def loop_reduce(
    x: torch.Tensor, index: torch.Tensor, ptr: torch.Tensor, mean: bool
) -> torch.Tensor:
    out = torch.zeros(ptr.numel() - 1, x.size(1), dtype=torch.float64)
    for i in range(ptr.numel() - 1):
        rows = x[index[ptr[i] : ptr[i + 1]]].double()
        if rows.numel():
            out[i] = rows.mean(0) if mean else rows.sum(0)
    return out


def check() -> str | None:
    torch.manual_seed(0)
    # widths: under one tile, not a power of two, wider than one tile; segments: empty ones,
    # one longer than a block of rows, a trailing empty one (padding)
    ptr = torch.tensor([0, 3, 3, 10, 30, 47, 47, 48, 48])
    for width in (5, 100, 300):
        for dtype in (torch.int64, torch.int32):
            x = torch.randn(60, width)
            index = torch.randint(0, 60, (48,), dtype=dtype)
            p = ptr.to(dtype)
            for mean in (True, False):
                got = segment_reduce(x, index, p, mean=mean, kernel=True)
                want = loop_reduce(x, index, p, mean)
                if not torch.allclose(got.double(), want, atol=1e-5):
                    return f"width {width} {dtype} mean={mean}: {(got.double() - want).abs().max()}"
        # the aggregation's backward: the kernel over the transposed edges
        dst = torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())
        index = torch.randint(0, 60, (48,))
        x = torch.randn(60, width, requires_grad=True)
        grad = torch.randn(ptr.numel() - 1, width)
        (got,) = torch.autograd.grad(
            (mean_aggregate_segment(x, index, ptr, dst, kernel=True) * grad).sum(), x
        )
        (want,) = torch.autograd.grad(
            (mean_aggregate_segment(x, index, ptr, dst, kernel=False) * grad).sum(), x
        )
        if not torch.allclose(got, want, atol=1e-5):
            return f"width {width}: backward differs by {(got - want).abs().max()}"
    return None


if __name__ == "__main__":
    check_main(check, "segment reduce: kernel equals the loop")
