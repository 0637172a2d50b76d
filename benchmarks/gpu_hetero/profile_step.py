"""Where a typed training step's time goes: N steps of one worker-mode trainer under the torch
profiler.

The trainer is the product's (:class:`HeteroTrainer`, one rank, worker mode): the MAG-shaped
graph at ``--scale``, R-SAGE, learnt embeddings for the featureless types with row-sparse
Adam, batches sampled and gathered on the pipeline's prefetch thread, the fixed-shape step
(a CUDA graph on a GPU) where it applies. After ``--warmup`` steps, ``--steps`` steps run
under ``torch.profiler``; printed per step:

- ``ms_per_step``: wall time of the profiled steps (the stream drained at both ends);
- ``gpu_busy_ms_per_step``: the union of the intervals in which a kernel, copy or memset ran;
- ``dtoh_copies_per_step``: device-to-host copies (``Memcpy DtoH`` on the device, all
  threads), and ``stream_syncs_per_step``: ``cudaStreamSynchronize`` /
  ``cudaDeviceSynchronize`` / ``cudaEventSynchronize`` calls, with the host time in them;
  each also for the training thread alone (``main_*``: the prefetch thread samples apart);
- ``host_syncs_per_step``: reads back that the training thread's Python made, counted by
  construction (:class:`HostSyncCounter`; where the code has it), so also on CPU.

On CPU the GPU figures are left out (a smoke run). The graph is generated once and kept in
``--graph-cache`` (a pickle) so that a second run, e.g. of an older checkout on
``PYTHONPATH``, reuses it. One JSON line goes to ``--out`` (and stdout); the profiler's table
to ``--table``.

    python benchmarks/gpu_hetero/profile_step.py --device cuda --out $OUT/profile-step.jsonl
    python -P benchmarks/gpu_hetero/profile_step.py --device cpu --scale 0.002 --fanout 5 3 \\
        --hidden 16 --embedding-dim 8 --batch-size 64 --warmup 2 --steps 3
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu_distributed"))

from spec_sections import model_section, training_section

from distgnn_api.spec import parse_spec
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.synthetic_hetero import SyntheticHeteroConfig, generate_mag
from distgnn_workload.runtime.seeds import train_batches
from distgnn_workload.runtime.training_data import contiguous_book, from_graph
from distgnn_workload.trainer.loop import HeteroTrainer

SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    graph_args(p)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--embedding-dim", type=int, default=128)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--label", default="", help="a name for this run in the JSON line")
    p.add_argument("--out", type=Path, default=None, help="append the JSON line here")
    p.add_argument("--table", type=Path, default=None, help="write the profiler's table here")
    return p.parse_args()


def graph_args(p: argparse.ArgumentParser) -> None:
    """The device, the graph (and its cache) and the batches: shared with sampler_time.py."""
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--fanout", type=int, nargs="+", default=[25, 20])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--graph-cache", type=Path, default=None)


def mag_graph(args: argparse.Namespace) -> HeteroGraphData:
    """The MAG-shaped graph at ``args.scale``, from ``args.graph_cache`` where it is."""
    cache = args.graph_cache
    if cache is not None and cache.is_file():
        with cache.open("rb") as f:
            graph: HeteroGraphData = pickle.load(f)
        return graph
    graph = generate_mag(SyntheticHeteroConfig(scale=args.scale, seed=0))
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:
            pickle.dump(graph, f, protocol=pickle.HIGHEST_PROTOCOL)
    return graph


def _trainer(args: argparse.Namespace, graph: HeteroGraphData, run_dir: Path) -> HeteroTrainer:
    spec = parse_spec(
        {
            "dataset": {
                "syntheticMag": {"scale": args.scale, "seed": 0},
                "hetero": {"targetNodeType": graph.target_node_type, "addReverseEdges": True},
            },
            "partition": {"algorithm": "random", "numPartitions": 1},
            "samplers": {"replicas": 0},
            "trainers": {"replicas": 1, "gpusPerPod": 1 if args.device == "cuda" else 0},
            "model": model_section("rsage", args, embeddingDim=args.embedding_dim),
            "training": training_section(
                args, epochs=1, bf16=args.precision == "bf16" and args.device == "cuda"
            ),
        }
    )
    data = from_graph(graph, contiguous_book(graph.node_counts, 1), 1)
    device = torch.device(args.device)
    placement: dict[str, Any] = {
        "rank": 0,
        "world_size": 1,
        "device": device,
        "ranks_of_holder": [[0]],
        "run_dir": run_dir,
        "job_uid": "profile-step",
    }
    try:
        from distgnn_workload.trainer.rank import TypedRank
    except ImportError:  # an older checkout (BEFORE): the trainer takes them as keywords
        return HeteroTrainer(spec, data, **placement)
    return HeteroTrainer(spec, data, TypedRank(**placement))


def _sync_counter() -> Any:
    """The training thread's counter of read-backs, where this checkout has one."""
    try:
        from distgnn_workload.runtime.host_syncs import HostSyncCounter
    except ImportError:
        return None
    return HostSyncCounter()


def _busy_ms(events: list[Any]) -> float:
    spans = sorted(
        (e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CUDA
    )
    busy, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    return busy / 1000.0


def _figures(prof: Any, steps: int, main_thread: int) -> dict[str, Any]:
    events = list(prof.events())
    dtoh = [e for e in events if e.name.startswith("Memcpy DtoH")]
    syncs = [e for e in events if e.name in SYNC_CALLS]
    memcpy = [e for e in events if e.name in ("cudaMemcpyAsync", "cudaMemcpy")]
    main = [e for e in syncs if e.thread == main_thread]
    return {
        "gpu_busy_ms_per_step": round(_busy_ms(events) / steps, 3),
        "dtoh_copies_per_step": round(len(dtoh) / steps, 2),
        "stream_syncs_per_step": round(len(syncs) / steps, 2),
        "main_stream_syncs_per_step": round(len(main) / steps, 2),
        "sync_host_ms_per_step": round(sum(e.cpu_time_total for e in syncs) / 1000 / steps, 3),
        "main_sync_host_ms_per_step": round(sum(e.cpu_time_total for e in main) / 1000 / steps, 3),
        "memcpy_calls_per_step": round(len(memcpy) / steps, 2),
        "memcpy_host_ms_per_step": round(sum(e.cpu_time_total for e in memcpy) / 1000 / steps, 3),
    }


def main() -> None:
    args = _args()
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here (use --device cpu for a smoke run)")
    started = time.perf_counter()
    graph = mag_graph(args)
    graph_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        trainer = _trainer(args, graph, Path(tmp))
        total = args.warmup + args.steps
        batches = train_batches(
            trainer.train_ids,
            [[0]],
            1,
            0,
            args.batch_size,
            epoch=0,
            seed=trainer.spec.training.seed,
        )
        if len(batches) < total:
            raise SystemExit(f"{len(batches)} batches in an epoch, {total} needed: lower the steps")
        trainer.ddp.train()
        loader = trainer._loader(batches[:total], 0)
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=activities)
        counter = _sync_counter()
        loss = torch.zeros(())
        wall = 0.0
        for i, batch in enumerate(loader):
            if i == args.warmup:
                if cuda:
                    torch.cuda.synchronize()
                prof.__enter__()  # type: ignore[no-untyped-call]
                if counter is not None:
                    counter.__enter__()
                start = time.perf_counter()
            loss = trainer._train_step(batch)
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        if counter is not None:
            counter.__exit__(None, None, None)
        prof.__exit__(None, None, None)  # type: ignore[no-untyped-call]
    record: dict[str, Any] = {
        "bench": "hetero_profile_step",
        "label": args.label,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "scale": args.scale,
        "fanout": args.fanout,
        "batch_size": args.batch_size,
        "precision": args.precision if cuda else "fp32",
        "graph_step": trainer.graph_step is not None,
        "captured": bool(trainer.graph_step is not None and trainer.graph_step.graph is not None),
        "steps": args.steps,
        "graph_s": round(graph_s, 1),
        "ms_per_step": round(1000 * wall / args.steps, 3),
        "loss": float(loss.detach()),
    }
    sampler = getattr(getattr(trainer, "hetero", None), "sampler", None)
    fitted = sampler.caps() if hasattr(sampler, "caps") else None
    if fitted is not None:  # caps fitted to the first batches (older checkouts: the bounds)
        record["sampler_slots_fitted"] = sum(fitted.flat())
        record["sampler_slots_bounds"] = sum(sampler.bounds(args.batch_size).flat())
        record["sampler_overflows"] = sampler.overflows
        record["oversize_steps"] = getattr(trainer.graph_step, "oversize", None)
    if counter is not None:
        record["host_syncs_per_step"] = round(counter.count / args.steps, 2)
        record["host_sync_sites"] = [
            f"{n}x {s.op} {s.where}" for s, n in counter.by_site().most_common(12)
        ]
    if cuda:
        record |= _figures(prof, args.steps, threading.get_native_id())
    line = json.dumps(record)
    print(line)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(line + "\n")
    if args.table is not None:
        sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        args.table.write_text(prof.key_averages().table(sort_by=sort, row_limit=40))


if __name__ == "__main__":
    main()
