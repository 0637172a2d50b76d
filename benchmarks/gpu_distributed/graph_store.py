"""The benchmark's graph: generated on the device, written once as a partition store."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch
from bench_args import products_edges
from records import emit
from synthetic_gpu import generate

from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition import PartitionStore, write_partitions


def build_store(
    args: argparse.Namespace, store_dir: Path, partitions: int, key: str
) -> PartitionStore:
    """Generate the graph on the device and write a store of ``partitions`` random partitions."""
    dev = torch.device(args.device)
    t0 = time.perf_counter()
    g = generate(
        args.nodes,
        products_edges(args),
        args.features,
        args.classes,
        device=dev,
        train_fraction=args.train_fraction,
        homophily=args.homophily,
        feature_noise=args.feature_noise,
    )
    n = g.num_nodes
    gen = torch.Generator(device=dev).manual_seed(1)
    train = torch.zeros(n, dtype=torch.bool, device=dev)
    train[g.train_idx] = True
    r = torch.rand(n, device=dev, generator=gen)
    val = ~train & (r < args.eval_fraction)
    test = ~train & (r >= 1.0 - args.eval_fraction)
    parts = torch.randint(0, partitions, (n,), device=dev, generator=gen)
    graph = GraphData(
        indptr=g.indptr.cpu().numpy(),
        indices=g.indices.cpu().numpy(),
        x=g.x.cpu().numpy(),
        y=g.y.cpu().numpy(),
        train_mask=train.cpu().numpy(),
        val_mask=val.cpu().numpy(),
        test_mask=test.cpu().numpy(),
        num_classes=args.classes,
        name="synthetic-products",
    )
    assignment = parts.to(torch.int32).cpu().numpy()
    info = g.info
    del g, train, val, test, parts, r
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    gen_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    if store_dir.exists():
        shutil.rmtree(store_dir)
    store = write_partitions(store_dir, graph, partitions, assignment=assignment, key=key)
    emit(
        args.out,
        {
            "bench": "dist_data",
            "partitions": partitions,
            "nodes": n,
            "directed_edges": int(graph.num_edges),
            "train_nodes": int(graph.train_mask.sum()),
            "homophily": info["homophily"],
            "feature_noise": info["feature_noise"],
            "generate_s": round(gen_s, 2),
            "partition_write_s": round(time.perf_counter() - t1, 2),
            "edge_cut_fraction": store.meta.edge_cut_fraction,
        },
    )
    return store
