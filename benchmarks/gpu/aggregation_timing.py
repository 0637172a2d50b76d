"""SAGE's neighbour mean alone, forward and backward, per aggregation, on the layers of
sampled batches (``step_bench.py``'s ``aggregation`` records).

For each layer of the batches (input width, then hidden), ``aggregate`` forward plus its
backward runs on random rows of that width, timed on the GPU by CUDA events (median of
``repeats`` per batch and layer); summed over the layers it is the aggregation's GPU time
in a step, apart from the host-bound eager step around it. Each aggregation's mean and
gradient are first checked against ``embedding_bag``'s.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from distgnn_workload.models.aggregation import Aggregation, aggregate
from distgnn_workload.sampling import HopBatch


def time_aggregation(
    how: Aggregation,
    hops: Sequence[HopBatch],
    widths: Sequence[int],
    dtype: torch.dtype,
    repeats: int,
) -> dict[str, Any]:
    """``how``'s milliseconds per step (and per layer) over ``hops``."""
    device = hops[0].edge_index.device
    per_layer = [0.0] * len(widths)
    for hop in hops:
        for layer, (src, dst, ptr, num_src, num_dst) in enumerate(layers(hop)):
            gen = torch.Generator(device=device).manual_seed(layer)
            x = torch.randn(num_src, widths[layer], device=device, generator=gen)
            x = x.to(dtype).requires_grad_(layer > 0)  # layer 0 reads the input rows
            grad = torch.ones(num_dst, widths[layer], device=device, dtype=dtype)
            check(how, x, src, dst, ptr, num_dst, grad)
            run = functools.partial(forward_backward, how, x, src, dst, ptr, num_dst, grad)
            per_layer[layer] += timed(run, device, repeats) / len(hops)
    return {
        "aggregation": how,
        "dtype": str(dtype).removeprefix("torch."),
        "ms_per_step": sum(per_layer),
        "ms_per_layer": per_layer,
        "widths": list(widths),
        "batches": len(hops),
    }


def layers(hop: HopBatch) -> list[tuple[Tensor, Tensor, Tensor, int, int]]:
    """Per layer: (src, dst, target ptr, rows it reads, rows it computes), as GraphSAGE's
    forward slices them."""
    src, dst = hop.edge_index[0], hop.edge_index[1]
    ptr = hop.get_target_ptr().to(src.dtype)
    out = []
    for layer in range(hop.num_hops):
        num_src, num_dst, num_edges = hop.layer_sizes(layer)
        out.append((src[:num_edges], dst[:num_edges], ptr[: num_dst + 1], num_src, num_dst))
    return out


def timed(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    """Median milliseconds of ``fn()`` (CUDA events on a GPU, the host clock elsewhere)."""
    fn()  # warm-up: a kernel compiles on its first call
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def forward_backward(
    how: Aggregation, x: Tensor, src: Tensor, dst: Tensor, ptr: Tensor, num_dst: int, grad: Tensor
) -> None:
    """One step's work of ``how`` on a layer: the mean, and its backward where ``x`` needs it."""
    out = aggregate(x, src, dst, ptr, num_dst, how)
    if x.requires_grad:
        torch.autograd.backward(out, grad)


def check(
    how: Aggregation, x: Tensor, src: Tensor, dst: Tensor, ptr: Tensor, num_dst: int, grad: Tensor
) -> None:
    """``how`` gives embedding_bag's mean (and gradient) on these rows, or raise."""
    if how == "embedding_bag":
        return
    leaf = x.detach().float().requires_grad_(True)
    want = aggregate(leaf, src, dst, ptr, num_dst, "embedding_bag")
    (want_grad,) = torch.autograd.grad(want, leaf, grad.float())
    probe = x.detach().requires_grad_(True)
    got = aggregate(probe, src, dst, ptr, num_dst, how)
    (got_grad,) = torch.autograd.grad(got, probe, grad)
    tol = 0.05 if x.dtype == torch.bfloat16 else 1e-4
    for name, a, b in (("mean", got, want), ("gradient", got_grad, want_grad)):
        if not torch.allclose(a.float(), b, atol=tol, rtol=tol):
            raise SystemExit(f"{how}: its {name} differs from embedding_bag's")
