"""Checks the Triton segment kernel against ``embedding_bag``, values and gradients.

Run as a script (``python segment_kernel_check.py cpu`` under ``TRITON_INTERPRET=1``, or
``cuda``); imported by the tests. Exits non-zero on the first mismatch.
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from distgnn_workload.models import segment_kernel
from distgnn_workload.models.aggregation import mean_aggregate, sum_aggregate


def random_csr(
    segments: int, rows: int, max_degree: int, dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    degree = torch.randint(0, max_degree + 1, (segments,), generator=gen)
    degree[:: max(1, segments // 5)] = 0  # some empty segments
    ptr = torch.zeros(segments + 1, dtype=torch.int64)
    ptr[1:] = degree.cumsum(0)
    index = torch.randint(0, rows, (int(ptr[-1]),), generator=gen)
    return index.to(dtype).to(device), ptr.to(dtype).to(device)


def check(device: str) -> None:
    assert segment_kernel.available(torch.empty(1, device=device)), "kernel not available"
    cases = [(40, 60, 5, 100), (33, 50, 40, 256), (17, 9, 3, 7), (8, 30, 20, 300)]
    for i, (segments, rows, max_degree, width) in enumerate(cases):
        for int_dtype in (torch.int32, torch.int64):
            index, ptr = random_csr(segments, rows, max_degree, int_dtype, device, seed=i)
            for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
                x = torch.randn(rows, width, device=device).to(dtype)
                for mean, mode in ((True, "mean"), (False, "sum")):
                    got = segment_kernel.segment_reduce(x, index, ptr, mean=mean)
                    want = F.embedding_bag(
                        index.long(), x.float(), ptr.long(), mode=mode, include_last_offset=True
                    )
                    err = (got.float() - want).abs().max().item()
                    scale = max(1.0, want.abs().max().item())
                    assert got.dtype == dtype and err <= tol * scale, (
                        f"{device} case {i} {int_dtype} {dtype} {mode}: max err {err}"
                    )
        # gradients through the autograd path equal embedding_bag's
        index, ptr = random_csr(segments, rows, max_degree, torch.int64, device, seed=100 + i)
        x = torch.randn(rows, width, device=device, requires_grad=True)
        weight = torch.randn(segments, width, device=device)
        (mean_aggregate(x, index, ptr) * weight).sum().backward()
        got_grad = x.grad.clone()
        x.grad = None
        want_out = F.embedding_bag(index, x, ptr, mode="mean", include_last_offset=True)
        (want_out * weight).sum().backward()
        err = (got_grad - x.grad).abs().max().item()
        assert err <= 1e-5, f"{device} case {i} gradient: max err {err}"
        summed = sum_aggregate(x.detach(), index, ptr)
        want_sum = F.embedding_bag(index, x.detach(), ptr, mode="sum", include_last_offset=True)
        assert (summed - want_sum).abs().max().item() <= 1e-4


if __name__ == "__main__":
    check(sys.argv[1] if len(sys.argv) > 1 else "cpu")
    print("segment kernel matches embedding_bag")
