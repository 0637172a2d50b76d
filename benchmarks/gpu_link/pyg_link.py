"""PyG's link-prediction baseline on the benchmark's store: ``LinkNeighborLoader`` + PyG
``GraphSAGE`` + a dot decoder, BCE over positives and binary negatives; stock and best effort.

The same graph as ``bench.py`` (``--store``: its kept store; message passing over its training
edges, both directions), the same fanout, hidden width, batch size (positive edges) and
negatives per positive (PyG's ``neg_sampling="binary"``: both ends drawn uniformly).

- ``stock``: ``LinkNeighborLoader`` with ``--workers`` workers, features on the CPU, the batch
  moved to the GPU each step, fp32.
- ``best``: persistent workers, pinned memory, prefetch 4, features on the GPU (the loader
  carries node ids only), ``--precision bf16`` autocast.

``--sampler distgnn`` swaps the sampling for ``LinkLoader`` over our sampler's PyG adapter
(``PyGNeighborSampler.sample_from_edges``: PyG's own edge sampling), for machines without
pyg-lib or torch-sparse. One JSON line per run (``bench: pyg_link_train``): positive edges/s
and seed rows/s (``2 + 2K`` per positive, as ``bench.py`` counts them), after ``--warmup``,
over ``--batches`` batches or ``--max-seconds`` of them, whichever ends first.

    python benchmarks/gpu_link/pyg_link.py --setup stock --workers 12 --store <dir>
    python benchmarks/gpu_link/pyg_link.py --setup best --workers 16 --precision bf16 --store <dir>
    python benchmarks/gpu_link/pyg_link.py --sampler distgnn --device cpu --store <dir> --batches 5
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from distgnn_workload.partition.link_split import read_link_split
from distgnn_workload.partition.store import PartitionStore


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--store", type=Path, required=True, help="bench.py's kept store")
    p.add_argument("--setup", choices=["stock", "best"], default="stock")
    p.add_argument("--sampler", choices=["pyg", "distgnn"], default="pyg")
    p.add_argument("--device", default="cuda")
    p.add_argument("--workers", type=int, default=12)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--fanout", type=int, nargs="+", default=[15, 10, 5])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=1024, help="positive edges")
    p.add_argument("--negatives", type=float, default=1.0, help="per positive (binary)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batches", type=int, default=40, help="timed batches (at most)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop timing after this many seconds of timed batches (at least one)",
    )
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args(argv)


def load(store_dir: Path) -> tuple[Any, torch.Tensor]:
    """``Data(x, edge_index)`` of the store's message-passing graph, and its training edges."""
    from torch_geometric.data import Data

    store = PartitionStore.open(store_dir)
    indptr, indices = store.topology()
    indptr_t = torch.from_numpy(np.array(indptr, dtype=np.int64))
    n = store.meta.num_nodes
    # the CSR lists, for every node, the sources of its in-edges: messages flow j -> i
    dst = torch.repeat_interleave(torch.arange(n), indptr_t.diff())
    src = torch.from_numpy(np.array(indices, dtype=np.int64))
    parts = [np.asarray(store.partition(p).features) for p in range(store.meta.num_partitions)]
    x = torch.from_numpy(np.concatenate(parts).reshape(n, -1).astype(np.float32))
    train = read_link_split(store_dir, "train")
    return Data(x=x, edge_index=torch.stack([src, dst]), num_nodes=n), torch.stack(
        [train.src, train.dst]
    )


def loader(args: argparse.Namespace, data: Any, train: torch.Tensor) -> Any:
    from torch_geometric.loader import LinkLoader, LinkNeighborLoader
    from torch_geometric.sampler import NegativeSampling

    neg = NegativeSampling("binary", amount=args.negatives)
    common: dict[str, Any] = {
        "edge_label_index": train,
        "neg_sampling": neg,
        "batch_size": args.batch_size,
        "shuffle": True,
        "num_workers": args.workers,
    }
    if args.setup == "best" and args.workers > 0:
        common.update(persistent_workers=True, pin_memory=True, prefetch_factor=4)
    if args.sampler == "distgnn":
        from distgnn_workload.sampling.pyg_adapter import PyGNeighborSampler

        sampler = PyGNeighborSampler(data, args.fanout, device="cpu")
        return LinkLoader(data, link_sampler=sampler, **common)
    return LinkNeighborLoader(data, num_neighbors=args.fanout, **common)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from torch_geometric.nn import GraphSAGE

    device = torch.device(args.device)
    data, train = load(args.store)
    x_device = data.x.to(device) if args.setup == "best" else None
    if x_device is not None:
        data.x = None  # the loader carries node ids only
    model = GraphSAGE(
        data.num_node_features if x_device is None else x_device.size(1),
        args.hidden,
        len(args.fanout),
        args.hidden,
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    bf16 = args.precision == "bf16" and device.type == "cuda"
    cast = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else nullcontext()
    times: list[float] = []
    positives = 0
    it = iter(loader(args, data, train))
    for step in range(args.warmup + args.batches):
        t0 = time.perf_counter()
        batch = next(it)
        x = x_device[batch.n_id.to(device)] if x_device is not None else batch.x.to(device)
        edge_index = batch.edge_index.to(device)
        label_index = batch.edge_label_index.to(device)
        label = batch.edge_label.to(device)
        with cast:
            h = model(x, edge_index)
            logits = (h[label_index[0]] * h[label_index[1]]).sum(-1)
        loss = F.binary_cross_entropy_with_logits(logits.float(), label.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
            positives += int((label == 1).sum())
            if args.max_seconds is not None and sum(times) >= args.max_seconds:
                break
    seconds = sum(times)
    rows_per_positive = 2 + 2 * args.negatives
    record = {
        "bench": "pyg_link_train",
        "setup": args.setup,
        "sampler": args.sampler,
        "workers": args.workers,
        "precision": "bf16" if bf16 else "fp32",
        "fanout": args.fanout,
        "hidden": args.hidden,
        "batch_size": args.batch_size,
        "batches": len(times),
        "positives_per_s": round(positives / seconds, 1),
        "seeds_per_s": round(positives * rows_per_positive / seconds, 1),
        "final_loss": round(float(loss.detach()), 4),
    }
    line = json.dumps(record)
    print(line)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
