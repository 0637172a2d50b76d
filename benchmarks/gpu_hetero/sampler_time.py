"""The typed sampler alone on the MAG-shaped graph: ms per batch of its static execution at
the bounds and at caps fitted to the first batches, and what the caps are.

One sampler (the trainers': :class:`HeteroNeighborSampler`, fanout [25, 20] for every edge
type by default), batches of ``--batch-size`` training papers. Per execution, ``--batches``
batches after ``--warmup``, each sampled and cut to its sizes (the one read-back), timed
on the host; the fitted run also counts the batches that went over its caps (sampled again
by the dynamic execution). Printed: one JSON line per execution (``--out`` appends), and a
table per node type and hop (edge type and hop) of the bound, the fitted cap and the mean
and largest size sampled.

    python benchmarks/gpu_hetero/sampler_time.py --graph-cache /tmp/distgnn-profile-mag.pkl
    python -P benchmarks/gpu_hetero/sampler_time.py --device cpu --scale 0.002 --fanout 5 3 \\
        --batch-size 64 --batches 3 --warmup 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_step import graph_args, mag_graph

from distgnn_workload.sampling import HeteroNeighborSampler
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.static_sample import StaticCaps


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    graph_args(p)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--fit-batches", type=int, default=8)
    p.add_argument("--out", type=Path, default=None, help="append the JSON lines here")
    return p.parse_args()


def _time(
    sampler: HeteroNeighborSampler, batches: list[torch.Tensor], warmup: int
) -> tuple[float, list[HeteroHopBatch]]:
    """Milliseconds per batch after ``warmup`` batches, and the batches timed."""
    for seeds in batches[:warmup]:
        sampler.sample(seeds)
    out = []
    started = time.perf_counter()
    for seeds in batches[warmup:]:
        out.append(sampler.sample(seeds))
    ms = (time.perf_counter() - started) * 1000 / max(1, len(batches) - warmup)
    return ms, out


def _replay_ms(sampler: HeteroNeighborSampler, seeds: torch.Tensor, seed_type: str) -> float:
    """GPU milliseconds of one replay of the captured run alone (no cut, no read-back)."""
    key = (seed_type, int(seeds.numel()))
    padded = seeds.to(sampler.device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sampler._replay(key, padded, int(seeds.numel()))
    start.record()
    for _ in range(20):
        sampler._replay(key, padded, int(seeds.numel()))
    end.record()
    end.synchronize()
    sampler._reset_tables()
    return round(start.elapsed_time(end) / 20, 3)


def _table(bounds: StaticCaps, fitted: StaticCaps | None, seen: list[HeteroHopBatch]) -> None:
    print(f"{'what':46} {'hop':>3} {'bound':>10} {'fitted':>10} {'mean':>10} {'max':>10}")
    rows: list[tuple[str, int, int, int | None, list[int]]] = []
    for t, caps in bounds.nodes.items():
        for h, cap in enumerate(caps):
            got = [b.num_nodes_per_hop[t][h] for b in seen]
            rows.append((f"nodes {t}", h, cap, fitted.nodes[t][h] if fitted else None, got))
    for et, caps in bounds.edges.items():
        for h, cap in enumerate(caps):
            got = [b.num_edges_per_hop[et][h] for b in seen]
            name = "edges " + "__".join(et)
            rows.append((name, h + 1, cap, fitted.edges[et][h] if fitted else None, got))
    for name, hop, cap, fit, got in rows:
        mean = sum(got) / max(1, len(got))
        fit_s = "-" if fit is None else f"{fit:,}"
        print(
            f"{name:46} {hop:>3} {cap:>10,} {fit_s:>10} {mean:>10,.0f} {max(got, default=0):>10,}"
        )
    total_fit = sum(fitted.flat()) if fitted else 0
    print(f"slots: bounds {sum(bounds.flat()):,}, fitted {total_fit:,}")


def main() -> None:
    args = _args()
    device = torch.device(args.device)
    graph = mag_graph(args)
    target = graph.target_node_type
    train = torch.from_numpy(graph.train_mask).nonzero().flatten()
    g = torch.Generator().manual_seed(0)
    need = args.fit_batches + args.warmup + args.batches
    batches = [
        train[torch.randperm(train.numel(), generator=g)[: args.batch_size]] for _ in range(need)
    ]
    fanouts = {et: list(args.fanout) for et in graph.edge_types}
    records: list[dict[str, Any]] = []
    fitted: StaticCaps | None = None
    bounds: StaticCaps | None = None
    seen: list[HeteroHopBatch] = []
    for execution in ("bounds", "fitted"):
        sampler = HeteroNeighborSampler(
            graph.in_csr,
            graph.node_counts,
            fanouts,
            seed_type=target,
            device=device,
            seed=1,
            static_shapes=True,
        )
        bounds = sampler.bounds(args.batch_size)
        if execution == "fitted":
            fitted = sampler.fit(batches[: args.fit_batches])
        sampler.prepare(args.batch_size)
        ms, seen = _time(sampler, batches[args.fit_batches :], args.warmup)
        replay_ms = _replay_ms(sampler, batches[-1], target) if device.type == "cuda" else None
        record = {
            "bench": "hetero_sampler_time",
            "execution": execution,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "batch_size": args.batch_size,
            "fanout": args.fanout,
            "batches": args.batches,
            "ms_per_batch": round(ms, 3),
            "replay_ms": replay_ms,
            "overflows": sampler.overflows,
            "edges_per_batch": round(
                sum(sum(e) for b in seen for e in b.num_edges_per_hop.values()) / len(seen), 1
            ),
        }
        records.append(record)
        print(json.dumps(record), flush=True)
    assert bounds is not None
    _table(bounds, fitted, seen)
    if args.out is not None:
        with args.out.open("a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
