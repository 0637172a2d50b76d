"""Where one trainer's time goes, in a single process on one GPU (no RPC, no DDP).

The graph and model of ``bench.py`` (products-scale synthetic graph, 3-layer GraphSAGE,
hidden 256, fanout 15/10/5, batch 1024). Per precision it writes JSON lines:

- ``sample``: the sampler (CUDA graph) and the feature gather alone, per batch;
- ``step``: the training step alone on pre-sampled batches: host ms to enqueue a step and
  GPU ms per step, with and without padded GEMM rows (``pad_rows``), per neighbour mean
  (``--aggregations``, e.g. ``segment kernel``: PyTorch's ``embedding_bag`` or the Triton
  segment kernel);
- ``aggregation``: per ``--aggregations``, SAGE's neighbour mean alone, forward and
  backward on the batches' layers, its GPU ms per step (``aggregation_timing.py``);
- ``loop``: the single-process loop of ``benchmarks/gpu`` (``BatchLoader`` + step);
- ``trainer``: the trainer's own epoch loop (``Trainer.train_epoch`` over a
  ``LocalPipeline``) in this process, with eager steps and with the step replayed from a
  CUDA graph (``steps``: eager or graph).

Comparing ``trainer`` here with ``worker-1`` of ``bench.py`` separates the loop from the
process around it (RPC agent, metrics server, ...); comparing ``loop`` and ``trainer``
separates the two loops. With ``--profile-dir``, ``torch.profiler`` tables (by self CUDA and
self CPU time) and a chrome trace of trainer steps are written there.

    python benchmarks/gpu_distributed/step_bench.py --out step.jsonl --profile-dir prof/
    python benchmarks/gpu_distributed/step_bench.py --device cpu --nodes 20000 --steps 5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "benchmarks" / "gpu_distributed"), str(REPO / "benchmarks" / "gpu")]

import bench_args  # noqa: E402
from aggregation_timing import time_aggregation  # noqa: E402
from records import emit  # noqa: E402
from spec_sections import model_section, training_section  # noqa: E402
from synthetic_gpu import generate  # noqa: E402
from train_step import make_step, sync, train_loader  # noqa: E402

from distgnn_api.spec import DistGNNJobSpec, parse_spec  # noqa: E402
from distgnn_workload.loader import BatchLoader, LocalFeatureSource, MiniBatch  # noqa: E402
from distgnn_workload.models.sage import GraphSAGE  # noqa: E402
from distgnn_workload.runtime.batches import LocalPipeline  # noqa: E402
from distgnn_workload.sampling import NeighborSampler  # noqa: E402
from distgnn_workload.trainer import loop, profiler, step_policy  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda")
    bench_args.add_graph_args(p, train_fraction=False)
    bench_args.add_model_args(p)
    p.add_argument("--precisions", nargs="+", default=["bf16", "fp32"])
    p.add_argument("--steps", type=int, default=40, help="timed steps of the step-alone runs")
    p.add_argument("--epochs", type=int, default=2, help="timed epochs of the loops")
    p.add_argument("--prefetch", type=int, default=4)
    bench_args.add_aggregation_args(p, ["segment"])  # of the step-alone runs
    p.add_argument("--profile-dir", type=Path, default=None)
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def job_spec(args: argparse.Namespace, precision: str) -> DistGNNJobSpec:
    return parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": args.nodes, "numEdges": args.nodes * 10}},
            "trainers": {"replicas": 1, "prefetch": args.prefetch},
            "model": model_section("sage", args),
            "training": training_section(args, epochs=100, bf16=precision == "bf16", evalEvery=0),
        }
    )


def bench_sample(
    sampler: NeighborSampler,
    feats: LocalFeatureSource,
    batches: list[Tensor],
    device: torch.device,
) -> dict[str, Any]:
    for ids in batches[:3]:
        feats.gather(sampler.sample(ids).node_ids)
    sync(device)
    start = time.perf_counter()
    nodes = edges = 0
    for ids in batches:
        hop = sampler.sample(ids)
        feats.gather(hop.node_ids)
        nodes += hop.num_nodes
        edges += hop.num_edges
    sync(device)
    wall = time.perf_counter() - start
    n = len(batches)
    return {
        "ms_per_batch": 1e3 * wall / n,
        "seeds_per_s": sum(int(b.numel()) for b in batches) / wall,
        "nodes_per_batch": nodes / n,
        "edges_per_batch": edges / n,
    }


def bench_step(
    step: Callable[[MiniBatch], Tensor],
    batches: list[MiniBatch],
    steps: int,
    device: torch.device,
) -> dict[str, Any]:
    for b in batches[:5]:
        step(b)
    sync(device)
    host = 0.0
    cuda = device.type == "cuda"
    marks = []
    start = time.perf_counter()
    for i in range(steps):
        t0 = time.perf_counter()
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            ev.record()
            marks.append(ev)
        step(batches[i % len(batches)])
        host += time.perf_counter() - t0
        if cuda and i % 4 == 3:
            sync(device)  # keep the host from running ahead: measure enqueue cost, not queueing
    sync(device)
    wall = time.perf_counter() - start
    out: dict[str, Any] = {
        "ms_per_step": 1e3 * wall / steps,
        "host_ms_per_step": 1e3 * host / steps,
        "seeds_per_s": steps * int(batches[0].hop.num_seeds) / wall,
    }
    return out


def bench_loop(
    step: Callable[[MiniBatch], Tensor],
    loader: BatchLoader,
    epochs: int,
    device: torch.device,
) -> dict[str, Any]:
    for i, batch in enumerate(loader):
        step(batch)
        if i >= 20:
            break
    sync(device)
    seeds = 0
    start = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            step(batch)
            seeds += batch.num_seeds
    sync(device)
    wall = time.perf_counter() - start
    return {"seeds_per_s": seeds / wall, "epoch_s": wall / epochs}


def bench_trainer(trainer: loop.Trainer, epochs: int, profile_dir: Path | None) -> dict[str, Any]:
    quiet = io.StringIO()
    if profile_dir is not None:
        os.environ[profiler.ENV_PROFILE_DIR] = str(profile_dir)
    with contextlib.redirect_stdout(quiet):
        trainer.train_epoch(0)  # warm-up (profiled when asked)
        os.environ.pop(profiler.ENV_PROFILE_DIR, None)
        stats = [trainer.train_epoch(e) for e in range(1, epochs + 1)]
    seconds = sum(s.seconds for s in stats)
    return {
        "seeds_per_s": sum(s.seeds for s in stats) / seconds,
        "epoch_s": seconds / len(stats),
        "data_wait_share": sum(s.data_wait_seconds for s in stats) / seconds,
        "host_wait_share": sum(s.host_wait_seconds for s in stats) / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device.index or 0)
        device = torch.device("cuda", torch.cuda.current_device())
    graph = generate(
        args.nodes, bench_args.products_edges(args), args.features, args.classes, device=device
    )
    emit(
        args.out,
        {
            "bench": "step_env",
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "nodes": graph.num_nodes,
            "train": int(graph.train_idx.numel()),
        },
    )
    sampler = NeighborSampler(graph.indptr, graph.indices, args.fanout, device=device, seed=0)
    sampler.prepare(args.batch_size)
    train_cpu = graph.train_idx.cpu()
    g = torch.Generator().manual_seed(0)
    perm = train_cpu[torch.randperm(train_cpu.numel(), generator=g)]
    seed_batches = list(torch.split(perm, args.batch_size))[:-1]
    run_dir = Path(tempfile.mkdtemp(prefix="distgnn-step-"))
    for precision in args.precisions:
        bf16 = precision == "bf16" and device.type == "cuda"
        dtype = torch.bfloat16 if bf16 else None
        feats = LocalFeatureSource(graph.x, graph.y, device, dtype=dtype)
        base = {"precision": precision}
        emit(
            args.out,
            {
                "bench": "sample",
                **base,
                **bench_sample(sampler, feats, seed_batches[: args.steps], device),
            },
        )
        presampled = []
        for ids in seed_batches[:16]:
            hop = sampler.sample(ids)
            presampled.append(MiniBatch(hop=hop, x=feats.gather(hop.node_ids), y=graph.y[ids]))
        widths = [args.features] + [args.hidden] * (len(args.fanout) - 1)
        for aggregation in args.aggregations:
            timing = time_aggregation(
                aggregation, [b.hop for b in presampled[:4]], widths, dtype or torch.float32, 20
            )
            emit(args.out, {"bench": "aggregation", **base, **timing})
        for aggregation, pad in itertools.product(args.aggregations, (False, True)):
            torch.manual_seed(0)
            model = GraphSAGE(
                args.features,
                args.hidden,
                graph.num_classes,
                len(args.fanout),
                0.5,
                aggregation=aggregation,
                pad_rows=pad,
            ).to(device)
            opt = torch.optim.Adam(model.parameters(), lr=0.003, fused=device.type == "cuda")
            step = make_step(model, opt, device, bf16)
            emit(
                args.out,
                {
                    "bench": "step",
                    **base,
                    "aggregation": aggregation,
                    "pad_rows": pad,
                    **bench_step(step, presampled, args.steps, device),
                },
            )
        del presampled
        model = GraphSAGE(args.features, args.hidden, graph.num_classes, len(args.fanout), 0.5)
        model = model.to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.003, fused=device.type == "cuda")
        loader = train_loader(graph, sampler, feats, args.batch_size, device, args.prefetch)
        emit(
            args.out,
            {
                "bench": "loop",
                **base,
                "prefetch": args.prefetch,
                **bench_loop(make_step(model, opt, device, bf16), loader, args.epochs, device),
            },
        )
        for steps in ("eager", "graph"):
            os.environ[step_policy.ENV_CUDA_GRAPH] = "1" if steps == "graph" else "0"
            spec = job_spec(args, precision)
            pipeline = LocalPipeline(
                sampler, feats, graph.y, device=device, prefetch=spec.trainers.prefetch
            )
            empty = [torch.zeros(0, dtype=torch.int64)]
            trainer = loop.Trainer(
                spec,
                rank=0,
                world_size=1,
                device=device,
                pipeline=pipeline,
                train_ids=[train_cpu],
                val_ids=empty,
                test_ids=empty,
                ranks_of_holder=[[0]],
                num_features=args.features,
                num_classes=graph.num_classes,
                run_dir=run_dir,
                job_uid="step-bench",
            )
            profile = None
            if args.profile_dir is not None:
                profile = args.profile_dir / f"step-{precision}-{steps}"
            record = bench_trainer(trainer, args.epochs, profile)
            graph_step = trainer.graph_step
            record["graph_captured"] = graph_step is not None and graph_step.graph is not None
            emit(args.out, {"bench": "trainer", **base, "steps": steps, **record})
            del trainer, pipeline
            if device.type == "cuda":
                torch.cuda.empty_cache()
        os.environ.pop(step_policy.ENV_CUDA_GRAPH, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
