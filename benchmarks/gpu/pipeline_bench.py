"""Single-process throughput of the sampling + loading + GraphSAGE training pipeline.

Builds the products-scale synthetic graph on the device (``synthetic_gpu``), then for each
precision measures, and writes as JSON lines:

- ``sample``: sampler + feature gather alone (seeds/s, sampled edges/s, hop sizes);
- ``step``: the training step alone over pre-sampled batches (the model's ceiling);
- ``pipeline``: end to end, ``BatchLoader`` with background prefetch feeding the trainer
  (seeds/s, sampled edges/s, data-wait share of wall time);
- ``breakdown``: one stream, no overlap, CUDA events between phases: sampling, feature
  gather, forward, backward, optimizer (ms per batch); optionally a ``torch.profiler`` table.

    python benchmarks/gpu/pipeline_bench.py --precision fp32 bf16 --out bench.jsonl
    python benchmarks/gpu/pipeline_bench.py --device cpu --nodes 20000 --edges 200000 \\
        --epochs 1 --warmup 2 --step-batches 5 --sample-batches 5 --profile-batches 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_args import add_graph_args, add_model_args
from synthetic_gpu import PRODUCTS_UNDIRECTED_EDGES, SyntheticGraph, generate
from train_step import make_step, sync, train_loader

from distgnn_workload.loader import BatchLoader, LocalFeatureSource, MiniBatch
from distgnn_workload.models import GraphSAGE
from distgnn_workload.models.sage import Aggregation
from distgnn_workload.sampling import NeighborSampler


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda")
    add_graph_args(
        p, edges_default=PRODUCTS_UNDIRECTED_EDGES, edges_help="undirected edges (stored twice)"
    )
    add_model_args(p)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument(
        "--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "tf32", "bf16"]
    )
    p.add_argument(
        "--aggregation",
        nargs="+",
        default=["segment", "embedding_bag"],
        choices=["embedding_bag", "segment", "kernel", "scatter"],
        help="aggregations for the step-only run; the pipeline uses the fastest",
    )
    p.add_argument(
        "--sampler",
        nargs="+",
        default=["graph", "dynamic"],
        choices=["graph", "static", "dynamic"],
        help="sampler executions to time alone (graph: static shapes in a CUDA graph; "
        "static: the same, eager; dynamic: exact shapes); the first feeds the other runs",
    )
    p.add_argument(
        "--pipeline-sampler",
        nargs="*",
        default=None,
        choices=["graph", "static", "dynamic"],
        help="sampler executions to run end to end (default: the first --sampler)",
    )
    p.add_argument(
        "--prefetch",
        type=int,
        nargs="+",
        default=[2],
        help="prefetch depths (one pipeline run each)",
    )
    p.add_argument("--epochs", type=int, default=2, help="timed end-to-end epochs")
    p.add_argument("--warmup", type=int, default=20, help="untimed warm-up batches per measurement")
    p.add_argument("--sample-batches", type=int, default=100)
    p.add_argument("--step-batches", type=int, default=200)
    p.add_argument(
        "--presampled", type=int, default=16, help="distinct batches the step-only run cycles over"
    )
    p.add_argument("--profile-batches", type=int, default=30)
    p.add_argument(
        "--torch-profile",
        nargs="*",
        default=[],
        choices=["fp32", "tf32", "bf16"],
        help="precisions to also profile with torch.profiler (table + gzipped trace)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", type=Path, default=None, help="JSON lines output (default: stdout only)"
    )
    p.add_argument("--profile-dir", type=Path, default=None)
    return p.parse_args(argv)


class Report:
    """Prints each record and appends it to the JSON-lines file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True)
        print(line, flush=True)
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(line + "\n")


def batch_ids(train_idx: Tensor, batch_size: int, count: int, seed: int) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    perm = train_idx.cpu()[torch.randperm(train_idx.numel(), generator=g)]
    per_epoch = max(1, perm.numel() // batch_size)
    return [
        perm[(i % per_epoch) * batch_size : (i % per_epoch + 1) * batch_size] for i in range(count)
    ]


def make_sampler(
    graph: SyntheticGraph, args: argparse.Namespace, device: torch.device, mode: str
) -> NeighborSampler:
    return NeighborSampler(
        graph.indptr,
        graph.indices,
        args.fanout,
        device=device,
        seed=args.seed,
        static_shapes=mode != "dynamic",
        cuda_graph=mode == "graph",
    )


def bench_sample(
    graph: SyntheticGraph,
    sampler: NeighborSampler,
    feats: LocalFeatureSource,
    args: argparse.Namespace,
    device: torch.device,
) -> dict[str, Any]:
    ids = batch_ids(
        graph.train_idx, args.batch_size, args.warmup + args.sample_batches, args.seed + 1
    )
    for i in range(args.warmup):
        feats.gather(sampler.sample(ids[i]).node_ids)
    sync(device)
    nodes = [0] * (len(args.fanout) + 1)
    edges = [0] * len(args.fanout)
    start = time.perf_counter()
    for i in range(args.warmup, len(ids)):
        hop = sampler.sample(ids[i])
        feats.gather(hop.node_ids)
        nodes = [a + b for a, b in zip(nodes, hop.num_nodes_per_hop, strict=True)]
        edges = [a + b for a, b in zip(edges, hop.num_edges_per_hop, strict=True)]
    sync(device)
    wall = time.perf_counter() - start
    n = args.sample_batches
    return {
        "seeds_per_s": n * args.batch_size / wall,
        "sampled_edges_per_s": sum(edges) / wall,
        "ms_per_batch": 1e3 * wall / n,
        "nodes_per_hop": [x / n for x in nodes],
        "edges_per_hop": [x / n for x in edges],
    }


def presample(
    graph: SyntheticGraph,
    sampler: NeighborSampler,
    feats: LocalFeatureSource,
    args: argparse.Namespace,
    device: torch.device,
) -> list[MiniBatch]:
    batches = []
    for ids in batch_ids(graph.train_idx, args.batch_size, args.presampled, args.seed + 2):
        hop = sampler.sample(ids)
        batches.append(
            MiniBatch(
                hop=hop,
                x=feats.gather(hop.node_ids),
                y=graph.y[hop.seed_ids.to(graph.y.device)].to(device),
            )
        )
    return batches


def bench_step(
    step: Callable[[MiniBatch], Tensor],
    batches: list[MiniBatch],
    args: argparse.Namespace,
    device: torch.device,
) -> dict[str, Any]:
    for i in range(args.warmup):
        step(batches[i % len(batches)])
    sync(device)
    start = time.perf_counter()
    for i in range(args.step_batches):
        loss = step(batches[i % len(batches)])
    sync(device)
    wall = time.perf_counter() - start
    return {
        "seeds_per_s": args.step_batches * args.batch_size / wall,
        "ms_per_batch": 1e3 * wall / args.step_batches,
        "last_loss": float(loss),
    }


def bench_pipeline(
    loader: BatchLoader,
    step: Callable[[MiniBatch], Tensor],
    args: argparse.Namespace,
    device: torch.device,
) -> dict[str, Any]:
    """``--epochs`` timed epochs of ``loader`` feeding ``step``, after ``--warmup`` steps."""
    for i, batch in enumerate(loader):  # warm-up: threads, streams, allocator
        step(batch)
        if i + 1 >= args.warmup:
            break
    sync(device)
    seeds = edges = batches = 0
    wait = gpu_wait = 0.0
    losses: list[Tensor] = []
    start = time.perf_counter()
    for _ in range(args.epochs):
        for batch in loader:
            losses.append(step(batch))
            seeds += batch.num_seeds
            edges += batch.hop.num_edges
            batches += 1
        wait += sum(loader.data_wait_s)
        gpu_wait += sum(loader.gpu_data_wait_s())  # synchronises: once per epoch
    sync(device)
    wall = time.perf_counter() - start
    return {
        "seeds_per_s": seeds / wall,
        "sampled_edges_per_s": edges / wall,
        "data_wait_share": wait / wall,
        "gpu_data_wait_share": gpu_wait / wall,
        "ms_per_batch": 1e3 * wall / batches,
        "batches": batches,
        "epochs": args.epochs,
        "epoch_seconds": wall / args.epochs,
        "first_loss": float(losses[0]),
        "last_loss": float(torch.stack(losses[-20:]).mean()),
    }


def bench_breakdown(
    graph: SyntheticGraph,
    sampler: NeighborSampler,
    feats: LocalFeatureSource,
    model: GraphSAGE,
    opt: torch.optim.Optimizer,
    args: argparse.Namespace,
    device: torch.device,
    precision: str,
) -> dict[str, Any]:
    """Phases run back to back on one stream; CUDA events (GPU) and host clocks between them."""
    phases = ["sample", "gather", "forward", "backward", "optimizer"]
    amp = precision == "bf16"
    ids = batch_ids(
        graph.train_idx, args.batch_size, args.warmup + args.profile_batches, args.seed + 3
    )
    cuda = device.type == "cuda"
    gpu_ms = dict.fromkeys(phases, 0.0)
    host_ms = dict.fromkeys(phases, 0.0)
    marks: list[Any] = []
    host: list[float] = []

    def mark() -> None:
        host.append(time.perf_counter())
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            ev.record()
            marks.append(ev)

    for i, seed_ids in enumerate(ids):
        timed = i >= args.warmup
        marks.clear()
        host.clear()
        mark()
        hop = sampler.sample(seed_ids)
        mark()
        x = feats.gather(hop.node_ids)
        y = graph.y[hop.seed_ids.to(graph.y.device)].to(device)
        mark()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(x, hop), y)
        mark()
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        mark()
        opt.step()
        mark()
        if timed:
            sync(device)
            for k, name in enumerate(phases):
                host_ms[name] += 1e3 * (host[k + 1] - host[k])
                if cuda:
                    gpu_ms[name] += marks[k].elapsed_time(marks[k + 1])
    n = args.profile_batches
    out: dict[str, Any] = {"host_ms": {k: v / n for k, v in host_ms.items()}}
    if cuda:
        out["gpu_ms"] = {k: v / n for k, v in gpu_ms.items()}
        out["gpu_ms_total"] = sum(gpu_ms.values()) / n
    out["host_ms_total"] = sum(host_ms.values()) / n
    return out


def cycle(loader: BatchLoader) -> Generator[MiniBatch, None, None]:
    while True:
        yield from loader


def torch_profile(
    loader: BatchLoader,
    step: Callable[[MiniBatch], Tensor],
    args: argparse.Namespace,
    device: torch.device,
    precision: str,
) -> None:
    """The profile table and the gzipped Chrome trace of 4 steps on ``loader``'s batches."""
    from torch.profiler import ProfilerActivity, profile

    assert args.profile_dir is not None
    args.profile_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    batches = cycle(loader)
    for _ in range(5):
        step(next(batches))
    sync(device)
    with profile(activities=activities) as prof:
        for _ in range(4):
            step(next(batches))
        sync(device)
    sort_key = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_key, row_limit=40)
    (args.profile_dir / f"profile_{precision}.txt").write_text(table)
    trace = args.profile_dir / f"trace_{precision}.json"
    prof.export_chrome_trace(str(trace))
    with trace.open("rb") as src, gzip.open(f"{trace}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    trace.unlink()
    batches.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    report = Report(args.out)
    torch.manual_seed(args.seed)
    report(
        {
            "bench": "env",
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        }
    )
    counts = (args.nodes, args.edges, args.features, args.classes)
    graph = generate(*counts, device=device, train_fraction=args.train_fraction, seed=args.seed)
    report(
        {
            "bench": "graph",
            "nodes": graph.num_nodes,
            "directed_edges": graph.num_edges,
            "train_nodes": graph.train_idx.numel(),
            "seconds": graph.seconds,
            **graph.info,
        }
    )
    samplers = {mode: make_sampler(graph, args, device, mode) for mode in args.sampler}
    sampler = samplers[args.sampler[0]]

    for precision in args.precision:
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
        feats = LocalFeatureSource(
            graph.x, graph.y, device, dtype=torch.bfloat16 if precision == "bf16" else None
        )
        base = {"precision": precision, "batch_size": args.batch_size, "fanout": args.fanout}

        def fresh(
            aggregation: Aggregation, precision: str = precision
        ) -> tuple[GraphSAGE, torch.optim.Optimizer, Callable[[MiniBatch], Tensor]]:
            model = GraphSAGE(
                args.features,
                args.hidden,
                graph.num_classes,
                len(args.fanout),
                args.dropout,
                aggregation=aggregation,
            ).to(device)
            opt = torch.optim.Adam(model.parameters(), lr=args.lr, fused=device.type == "cuda")
            return model, opt, make_step(model, opt, device, precision == "bf16")

        for mode, one in samplers.items():
            report(
                {
                    "bench": "sample",
                    "sampler": mode,
                    **base,
                    **bench_sample(graph, one, feats, args, device),
                }
            )
        batches = presample(graph, sampler, feats, args, device)
        step_rate: dict[Aggregation, float] = {}
        for aggregation in args.aggregation:
            _, _, step = fresh(aggregation)
            result = bench_step(step, batches, args, device)
            step_rate[aggregation] = result["seeds_per_s"]
            report({"bench": "step", "aggregation": aggregation, **base, **result})
        del batches
        best: Aggregation = max(step_rate, key=lambda a: step_rate[a])
        model, opt, step = fresh(best)
        for mode in args.pipeline_sampler or args.sampler[:1]:
            for prefetch in args.prefetch:
                loader = train_loader(
                    graph, samplers[mode], feats, args.batch_size, device, prefetch, args.seed
                )
                figures = bench_pipeline(loader, step, args, device)
                del loader
                report(
                    {
                        "bench": "pipeline",
                        "sampler": mode,
                        "aggregation": best,
                        "prefetch": prefetch,
                        **base,
                        **figures,
                    }
                )
        report(
            {
                "bench": "breakdown",
                **base,
                **bench_breakdown(graph, sampler, feats, model, opt, args, device, precision),
            }
        )
        if precision in args.torch_profile and args.profile_dir is not None:
            prefetch = max(args.prefetch)
            loader = train_loader(
                graph, sampler, feats, args.batch_size, device, prefetch, args.seed + 7
            )
            torch_profile(loader, step, args, device, precision)
            del loader
        del feats, model, opt, step
        if device.type == "cuda":
            torch.cuda.empty_cache()
            report(
                {
                    "bench": "memory",
                    **base,
                    "max_allocated_gb": torch.cuda.max_memory_allocated(device) / 2**30,
                }
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
