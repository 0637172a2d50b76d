"""Edge cut of the out-of-core METIS (``partition/ooc_metis.py``, METIS on a sampled subgraph)
against a random assignment and against METIS on the whole graph in memory, on one streamed
synthetic graph small enough for all three (products family: homophily 0.8, 47 classes).

In-memory METIS here balances nodes only, as the out-of-core one does (the partition Job's
in-memory METIS also balances train nodes and edges). Each assignment's cut is counted over
the streamed pairs (self-loops aside), its node balance is the largest partition over the
mean, and its time is the process's CPU seconds for that step.

    python benchmarks/capacity/ooc_metis_cut.py --nodes 1250000 --edges 16000000 \\
        --partitions 8 --sample-edges 4000000 --out benchmarks/capacity/results/ooc-metis-cut.json
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import SyntheticDataset
from distgnn_workload.data.csr import csr_from_edges
from distgnn_workload.data.stream import StreamedGraph
from distgnn_workload.data.synthetic_stream import stream_synthetic
from distgnn_workload.partition.algorithms import random_assignment
from distgnn_workload.partition.metis import _metis
from distgnn_workload.partition.ooc_metis import sampled_metis_assignment


def cut_share(graph: StreamedGraph, parts: npt.NDArray[np.int32]) -> float:
    cut = total = 0
    for src, dst in graph.edges():
        real = src != dst
        cut += int(np.count_nonzero(parts[src[real]] != parts[dst[real]]))
        total += int(np.count_nonzero(real))
    return cut / total


def timed(step: Callable[[], npt.NDArray[np.int32]]) -> tuple[npt.NDArray[np.int32], float]:
    t = time.process_time()
    parts = step()
    return parts, time.process_time() - t


def in_memory(graph: StreamedGraph, k: int, seed: int) -> npt.NDArray[np.int32]:
    src, dst = zip(*graph.edges(), strict=True)
    indptr, indices, _ = csr_from_edges(np.concatenate(src), np.concatenate(dst), graph.num_nodes)
    del src, dst
    weights = np.ones((graph.num_nodes, 1), dtype=np.int64)
    return _metis(indptr, indices.astype(np.int64), k, weights, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1_250_000)
    ap.add_argument("--edges", type=int, default=16_000_000, help="undirected pairs drawn")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--sample-edges", type=int, default=4_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    spec = SyntheticDataset(
        num_nodes=args.nodes,
        num_edges=args.edges,
        num_features=4,
        num_classes=47,
        homophily=0.8,
    )
    graph = stream_synthetic(spec)
    k, seed = args.partitions, args.seed
    found: dict[str, Any] = {}
    how: dict[str, Any] = {}

    def sampled() -> npt.NDArray[np.int32]:
        parts, record = sampled_metis_assignment(
            graph, k, sample_edges=args.sample_edges, seed=seed
        )
        how.update(record)
        return parts

    steps: dict[str, Callable[[], npt.NDArray[np.int32]]] = {
        "random": lambda: random_assignment(graph.num_nodes, k, seed),
        "out_of_core_metis": sampled,
        "in_memory_metis": lambda: in_memory(graph, k, seed),
    }
    for name, step in steps.items():
        parts, cpu_s = timed(step)
        loads = np.bincount(parts, minlength=k)
        found[name] = {
            "edge_cut_fraction": round(cut_share(graph, parts), 5),
            "node_balance": round(float(loads.max() / (graph.num_nodes / k)), 5),
            "cpu_s": round(cpu_s, 1),
            "max_rss_bytes_so_far": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
        print(name, found[name], flush=True)
    result = {
        "graph": {
            "nodes": args.nodes,
            "edge_pairs_drawn": args.edges,
            "partitions": k,
            "homophily": 0.8,
            "classes": 47,
        },
        "sample_edges": args.sample_edges,
        "assignments": found,
        "out_of_core_assignment": how,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
