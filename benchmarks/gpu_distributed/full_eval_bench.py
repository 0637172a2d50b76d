"""Full-neighbourhood (layer-wise) evaluation at products scale: seconds per pass and GPU memory.

Builds the products-shaped synthetic store of ``bench.py`` (generated on the GPU, random
2-partition assignment), then for each GPU count and precision runs
``distgnn_workload.evaluation.LayerwiseInference`` of a 3-layer GraphSAGE (hidden 256, random
weights) in one process per GPU over NCCL: a first pass (warm-up, allocations) and a timed
second one. Rank 0 prints one JSON record per run: seconds per pass, peak GPU memory per rank,
and the sum of |logits| over all nodes (equal across GPU counts up to rounding: the same
function was computed). Run from the repository root with the workload importable::

    python benchmarks/gpu_distributed/full_eval_bench.py --gpus 1 2 --out results/full_eval.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))
sys.path.insert(0, str(REPO / "benchmarks" / "gpu_distributed"))

from bench import build_store, emit  # noqa: E402
from synthetic_gpu import FEATURE_NOISE, HOMOPHILY, PRODUCTS_NODES  # noqa: E402

from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE  # noqa: E402
from distgnn_workload.evaluation import LayerwiseInference  # noqa: E402
from distgnn_workload.models import GraphSAGE  # noqa: E402
from distgnn_workload.partition import PartitionStore  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=PRODUCTS_NODES)
    p.add_argument("--edges", type=int, default=None, help="undirected; default: products' density")
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--classes", type=int, default=47)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    p.add_argument("--precision", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp32"])
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/distgnn-full-eval-bench"))
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    # what bench.build_store reads
    args.device, args.train_fraction, args.eval_fraction = "cuda", 0.08, 0.005
    args.homophily, args.feature_noise = HOMOPHILY, FEATURE_NOISE
    return args


def _rank(
    rank: int,
    world: int,
    port: int,
    store_path: str,
    args: argparse.Namespace,
    bf16: bool,
    out: str,
) -> None:
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        store = PartitionStore.open(store_path)
        torch.manual_seed(0)
        model = GraphSAGE(store.meta.num_features, args.hidden, store.meta.num_classes, args.layers)
        model = model.to(device).eval()
        engine = LayerwiseInference.of_store(
            store, rank=rank, world_size=world, device=device, bf16=bf16
        )
        seconds = []
        logits = None
        for _ in range(2):
            del logits
            torch.cuda.synchronize(device)
            dist.barrier()
            start = time.perf_counter()
            logits = engine.logits(model)
            torch.cuda.synchronize(device)
            dist.barrier()
            seconds.append(time.perf_counter() - start)
        assert logits is not None
        total = logits.double().abs().sum()
        dist.all_reduce(total)
        peak = torch.tensor([torch.cuda.max_memory_allocated(device) / 2**30], device=device)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        if rank == 0:
            record: dict[str, Any] = {
                "bench": "full_eval",
                "gpus": world,
                "precision": "bf16" if bf16 else "fp32",
                "nodes": store.meta.num_nodes,
                "directed_edges": store.meta.num_edges,
                "hidden": args.hidden,
                "layers": args.layers,
                "chunks_per_rank": len(engine.chunks(NODE_TYPE, [EDGE_TYPE])),
                "first_pass_s": round(seconds[0], 3),
                "pass_s": round(seconds[1], 3),
                "peak_gpu_gib_per_rank": round(float(peak), 2),
                "abs_logit_sum": float(total),
            }
            Path(out).write_text(json.dumps(record))
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    store = build_store(args, args.work_dir / "store", max(args.gpus), "full-eval")
    from distgnn_operator.local.ports import free_ports

    for gpus in args.gpus:
        if gpus > torch.cuda.device_count():
            emit(args.out, {"bench": "full_eval", "gpus": gpus, "skipped": "not enough GPUs"})
            continue
        for precision in args.precision:
            with tempfile.NamedTemporaryFile(suffix=".json") as out:
                mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
                    _rank,
                    args=(
                        gpus,
                        free_ports(1)[0],
                        str(store.path),
                        args,
                        precision == "bf16",
                        out.name,
                    ),
                    nprocs=gpus,
                    start_method="spawn",
                )
                emit(args.out, json.loads(Path(out.name).read_text()))


if __name__ == "__main__":
    main()
