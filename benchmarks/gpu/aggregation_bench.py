"""SAGE's neighbour mean alone, forward and backward, per aggregation, on real batch shapes.

Samples batches of the products-scale synthetic graph (fanout 15/10/5, batch 1024) and, for
each layer of a 3-layer GraphSAGE (input width ``--features``, then ``--hidden``), times
``aggregate`` forward plus its backward on random rows of that width, on the GPU by CUDA
events (median of ``--repeats`` per batch and layer, summed over the layers: the
aggregation's GPU time per step). Each aggregation's output and gradient are checked
against ``embedding_bag``'s first. One JSON line per aggregation (and one per layer).

    python benchmarks/gpu/aggregation_bench.py --aggregations segment kernel --out agg.jsonl
    python benchmarks/gpu/aggregation_bench.py --device cpu --nodes 20000 --repeats 2
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any, get_args

import torch
from torch import Tensor

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "benchmarks" / "gpu"), str(REPO / "benchmarks" / "gpu_distributed")]

from bench_args import add_graph_args, add_model_args  # noqa: E402
from records import emit  # noqa: E402
from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES, generate  # noqa: E402

from distgnn_workload.models.aggregation import Aggregation, aggregate  # noqa: E402
from distgnn_workload.sampling import HopBatch, NeighborSampler  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda")
    add_graph_args(p, train_fraction=False)
    add_model_args(p)
    p.add_argument(
        "--aggregations",
        nargs="+",
        default=["segment", "kernel"],
        choices=list(get_args(Aggregation)),
    )
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


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


def timed(fn: Any, device: torch.device, repeats: int) -> float:
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if args.dtype == "bf16" and device.type == "cuda" else torch.float32
    edges = args.edges or round(args.nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES)
    graph = generate(args.nodes, edges, args.features, args.classes, device=device)
    sampler = NeighborSampler(graph.indptr, graph.indices, args.fanout, device=device, seed=0)
    seeds = graph.train_idx.cpu()[: args.batch_size * args.batches]
    hops = [sampler.sample(s) for s in torch.split(seeds, args.batch_size)]
    widths = [args.features] + [args.hidden] * (len(args.fanout) - 1)
    totals: dict[str, float] = {}
    for how in args.aggregations:
        per_layer = [0.0] * len(widths)
        for hop in hops:
            for layer, (src, dst, ptr, num_src, num_dst) in enumerate(layers(hop)):
                gen = torch.Generator(device=device).manual_seed(layer)
                x = torch.randn(num_src, widths[layer], device=device, generator=gen)
                x = x.to(dtype).requires_grad_(layer > 0)  # layer 0 reads the input rows
                grad = torch.ones(num_dst, widths[layer], device=device, dtype=dtype)
                check(how, x, src, dst, ptr, num_dst, grad)

                run = functools.partial(forward_backward, how, x, src, dst, ptr, num_dst, grad)
                per_layer[layer] += timed(run, device, args.repeats) / len(hops)
        totals[how] = sum(per_layer)
        for layer, ms in enumerate(per_layer):
            emit(args.out, {"bench": "aggregation_layer", "aggregation": how, "layer": layer,
                            "width": widths[layer], "ms": ms})  # fmt: skip
        emit(args.out, {"bench": "aggregation", "aggregation": how, "dtype": str(dtype).removeprefix("torch."),
                        "ms_per_step": totals[how], "batches": len(hops),
                        "edges_per_batch": sum(h.num_edges for h in hops) / len(hops)})  # fmt: skip
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
