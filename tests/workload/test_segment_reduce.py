"""The segment reduction behind SAGE's mean (:mod:`distgnn_workload.models.segment_reduce`):
its fallback and the aggregations built on it on CPU; its Triton kernel in Triton's
interpreter (a process of its own) and on a GPU (gpu tier)."""

from __future__ import annotations

import pytest
import torch

from distgnn_workload.models.aggregation import Aggregation, aggregate
from distgnn_workload.models.segment_reduce import segment_reduce, triton_available
from tests.support.interpreted import run_interpreted
from tests.support.segment_reduce_check import loop_reduce


def _case(width: int = 12) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    ptr = torch.tensor([0, 2, 2, 9, 20, 20])
    dst = torch.repeat_interleave(torch.arange(ptr.numel() - 1), ptr.diff())
    return torch.randn(30, width), torch.randint(0, 30, (20,)), ptr, dst


@pytest.mark.parametrize("mean", [True, False])
def test_the_fallback_reduces_each_segment_and_zeroes_empty_ones(mean: bool) -> None:
    x, index, ptr, _ = _case()
    got = segment_reduce(x, index, ptr, mean=mean)
    assert torch.allclose(got.double(), loop_reduce(x, index, ptr, mean), atol=1e-6)
    assert got[1].abs().sum() == 0
    assert got[4].abs().sum() == 0


def test_every_aggregation_gives_the_same_mean_and_gradient() -> None:
    x, index, ptr, dst = _case()
    results = {}
    hows: tuple[Aggregation, ...] = ("embedding_bag", "segment", "kernel", "scatter")
    for how in hows:
        leaf = x.clone().requires_grad_(True)
        out = aggregate(leaf, index, dst, ptr, ptr.numel() - 1, how)
        (grad,) = torch.autograd.grad((out * torch.arange(out.numel()).view_as(out)).sum(), leaf)
        results[how] = (out.detach(), grad)
    for how, (out, grad) in results.items():
        assert torch.allclose(out, results["embedding_bag"][0], atol=1e-5), how
        assert torch.allclose(grad, results["embedding_bag"][1], atol=1e-4), how


@pytest.mark.slow
@pytest.mark.skipif(not triton_available(), reason="needs Triton")
def test_the_kernel_in_tritons_interpreter_equals_the_loop() -> None:
    run_interpreted("segment_reduce_check.py", "kernel equals the loop")


@pytest.mark.gpu
def test_the_kernel_on_the_gpu_matches_embedding_bag_also_in_a_cuda_graph() -> None:
    if not torch.cuda.is_available() or not triton_available():
        pytest.skip("needs a CUDA device and Triton (gpu tier)")
    torch.manual_seed(2)
    device = torch.device("cuda")
    x = torch.randn(50_000, 100, device=device, dtype=torch.bfloat16)
    degree = torch.randint(0, 16, (20_000,), device=device)
    ptr = torch.cat([degree.new_zeros(1), degree.cumsum(0)])
    index = torch.randint(0, 50_000, (int(ptr[-1]),), device=device)
    for mean in (True, False):
        got = segment_reduce(x, index, ptr, mean=mean)
        want = torch.nn.functional.embedding_bag(
            index, x.float(), ptr, mode="mean" if mean else "sum", include_last_offset=True
        )
        assert torch.allclose(got.float(), want, atol=0.05, rtol=0.02), mean
    static = segment_reduce(x, index, ptr, mean=True)  # warm-up: the kernel compiled
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = segment_reduce(x, index, ptr, mean=True)
    x.mul_(2)
    graph.replay()
    torch.cuda.synchronize()
    want = torch.nn.functional.embedding_bag(
        index, x.float(), ptr, mode="mean", include_last_offset=True
    )
    assert torch.allclose(static.float(), want, atol=0.1, rtol=0.02)
