"""Baseline: PyG ``NeighborLoader`` (CPU workers, torch-sparse sampling) + PyG GraphSAGE.

The same synthetic graph as ``pipeline_bench.py`` (generated on the GPU, then moved to host
memory, since ``NeighborLoader`` samples on the CPU), the same fanouts, batch size and model
width; PyG's ``GraphSAGE`` computes every sampled node at every layer (torch-sparse returns
no per-hop counts, so there is no trimming). Writes JSON lines: ``pyg_loader`` (sampling and
collation alone) and ``pyg_train`` (end to end).

    python benchmarks/gpu/pyg_baseline.py --workers 12 --out pyg.jsonl
    # without torch-sparse, e.g. on a laptop: the same loop over NodeLoader + our sampler
    python benchmarks/gpu/pyg_baseline.py --sampler distgnn --device cpu --nodes 20000 --edges 200000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES, generate


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--device", default="cuda", help="where the model trains (the graph is generated here too)"
    )
    p.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    p.add_argument(
        "--edges",
        type=int,
        default=PRODUCTS_UNDIRECTED_EDGES,
        help="undirected edges (stored twice)",
    )
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--classes", type=int, default=47)
    p.add_argument("--train-fraction", type=float, default=0.08)
    p.add_argument("--fanout", type=int, nargs="+", default=[15, 10, 5])
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--workers", type=int, default=12)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument(
        "--sampler",
        choices=["pyg", "distgnn"],
        default="pyg",
        help="pyg: NeighborLoader (needs torch-sparse or pyg-lib); distgnn: NodeLoader + PyGNeighborSampler",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def emit(out: Path | None, record: dict[str, Any]) -> None:
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from torch_geometric.data import Data
    from torch_geometric.nn.models import GraphSAGE

    device = torch.device(args.device)
    graph = generate(
        args.nodes,
        args.edges,
        args.features,
        args.classes,
        device=device,
        train_fraction=args.train_fraction,
        seed=args.seed,
    )
    start = time.perf_counter()
    deg = graph.indptr.diff()
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes, device=device), deg)
    # CSR rows are sorted, so edge_index is sorted by target: NeighborLoader skips its sort
    edge_index = torch.stack([graph.indices.to(torch.int64), dst]).cpu()
    data = Data(x=graph.x.cpu(), y=graph.y.cpu(), edge_index=edge_index, num_nodes=graph.num_nodes)
    train_idx = graph.train_idx.cpu()
    del graph, dst, deg
    if device.type == "cuda":
        torch.cuda.empty_cache()
    common = {
        "batch_size": args.batch_size,
        "input_nodes": train_idx,
        "shuffle": True,
        "num_workers": args.workers,
        "persistent_workers": args.workers > 0,
    }
    if args.sampler == "pyg":
        from torch_geometric.loader import NeighborLoader

        loader = NeighborLoader(data, num_neighbors=args.fanout, is_sorted=True, **common)
    else:
        from torch_geometric.loader import NodeLoader

        from distgnn_workload.sampling import PyGNeighborSampler

        loader = NodeLoader(
            data, node_sampler=PyGNeighborSampler(data, args.fanout, seed=args.seed), **common
        )
    setup_s = time.perf_counter() - start
    emit(
        args.out,
        {
            "bench": "pyg_env",
            "sampler": args.sampler,
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "nodes": data.num_nodes,
            "directed_edges": int(edge_index.size(1)),
            "train_nodes": int(train_idx.numel()),
            "setup_seconds": setup_s,
            "workers": args.workers,
            "fanout": args.fanout,
            "batch_size": args.batch_size,
        },
    )

    def batches() -> Iterator[Any]:
        while True:
            yield from loader

    stream = batches()
    for _ in range(args.warmup):
        next(stream)
    start = time.perf_counter()
    seeds = edges = 0
    for _ in range(args.batches):
        batch = next(stream)
        seeds += batch.batch_size
        edges += batch.edge_index.size(1)
    wall = time.perf_counter() - start
    emit(
        args.out,
        {
            "bench": "pyg_loader",
            "sampler": args.sampler,
            "seeds_per_s": seeds / wall,
            "sampled_edges_per_s": edges / wall,
            "ms_per_batch": 1e3 * wall / args.batches,
        },
    )

    model = GraphSAGE(args.features, args.hidden, len(args.fanout), args.classes, dropout=0.5).to(
        device
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def step(batch: Any) -> torch.Tensor:
        x = batch.x.to(device, non_blocking=True)
        y = batch.y[: batch.batch_size].to(device, non_blocking=True)
        ei = batch.edge_index.to(device, non_blocking=True)
        out = model(x, ei)[: batch.batch_size]
        loss = F.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        opt.step()
        return loss.detach()

    for _ in range(args.warmup):
        step(next(stream))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    seeds = edges = 0
    wait = 0.0
    for _ in range(args.batches):
        t0 = time.perf_counter()
        batch = next(stream)
        wait += time.perf_counter() - t0
        loss = step(batch)
        seeds += batch.batch_size
        edges += batch.edge_index.size(1)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    emit(
        args.out,
        {
            "bench": "pyg_train",
            "sampler": args.sampler,
            "seeds_per_s": seeds / wall,
            "sampled_edges_per_s": edges / wall,
            "data_wait_share": wait / wall,
            "ms_per_batch": 1e3 * wall / args.batches,
            "last_loss": float(loss),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
