"""The neighbour-mean kernels of a products-shaped sampled batch: ``embedding_bag`` against
the Triton segment kernel, forward and backward, per layer, on one GPU.

Shapes are those of a [15, 10, 5] fanout over a batch of 1024 seeds on products (100
input features, hidden 256), with random sources over each layer's source rows.

    python benchmarks/gpu/segment_kernel_bench.py [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from distgnn_workload.models import segment_kernel
from distgnn_workload.models.aggregation import mean_aggregate_segment

# (name, targets, degree, source rows, features)
LAYERS = (
    ("layer0", 155_000, 6, 700_000, 100),
    ("layer1", 16_000, 10, 155_000, 256),
    ("layer2", 1_024, 15, 16_000, 256),
)


def time_ms(fn: Callable[[], object], iters: int = 50) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", choices=["bf16", "fp32"], nargs="*", default=["bf16", "fp32"])
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    records = []
    for dtype_name in args.dtype:
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
        for name, targets, degree, rows, width in LAYERS:
            gen = torch.Generator(device="cuda").manual_seed(0)
            deg = torch.randint(1, 2 * degree, (targets,), device="cuda", generator=gen)
            ptr = torch.zeros(targets + 1, dtype=torch.int64, device="cuda")
            ptr[1:] = deg.cumsum(0)
            edges = int(ptr[-1])
            src = torch.randint(0, rows, (edges,), device="cuda", generator=gen)
            dst = torch.repeat_interleave(torch.arange(targets, device="cuda"), deg)
            x = torch.randn(rows, width, device="cuda", dtype=dtype, requires_grad=True)
            grad = torch.randn(targets, width, device="cuda", dtype=dtype)
            result: dict[str, object] = {
                "bench": "segment_kernel",
                "layer": name,
                "dtype": dtype_name,
                "targets": targets,
                "edges": edges,
                "features": width,
                "device": torch.cuda.get_device_name(0),
            }
            for kernel in ("torch", "triton"):
                import os

                os.environ[segment_kernel.KERNEL_ENV] = kernel

                def forward() -> None:
                    with torch.no_grad():
                        if kernel == "torch":
                            F.embedding_bag(src, x, ptr, mode="mean", include_last_offset=True)
                        else:
                            segment_kernel.segment_reduce(x, src, ptr, mean=True)

                def backward() -> None:
                    out = mean_aggregate_segment(x, src, ptr, dst)
                    (gx,) = torch.autograd.grad(out, x, grad)

                result[f"{kernel}_forward_ms"] = round(time_ms(forward), 4)
                result[f"{kernel}_forward_backward_ms"] = round(time_ms(backward), 4)
            os.environ.pop(segment_kernel.KERNEL_ENV, None)
            print(json.dumps(result), flush=True)
            records.append(result)
    if args.out:
        with args.out.open("a") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
