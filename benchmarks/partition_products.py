"""Benchmark: the products-scale synthetic graph into METIS partitions on this machine.

Generates the ogbn-products-shaped synthetic graph (2,449,029 nodes, 61,859,140 edges,
100 features, 47 classes by default), partitions it, writes the store, and reports the
time of each step, the resident memory after each and at peak (VmHWM), and the edge cut.
Goals: partitioning (assignment + write) under 5 minutes, peak RSS under 12 GB.

    python benchmarks/partition_products.py [--parts 4] [--algorithm metis] [--out DIR]
    python benchmarks/partition_products.py --nodes 245000 --edges 6186000   # a 1/10 run

The store goes to a temporary directory removed at the end unless --out is given.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import shutil
import tempfile
import time
from pathlib import Path

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec, SyntheticDataset
from distgnn_workload.data.synthetic import generate
from distgnn_workload.partition import algorithms, write_partitions

GB = 1 << 30


def proc_status_kb(field: str) -> int:
    """A memory figure of this process from /proc/self/status, in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def memory() -> dict[str, float]:
    return {
        "rss_gb": proc_status_kb("VmRSS") / (1 << 20),
        "peak_rss_gb": proc_status_kb("VmHWM") / (1 << 20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_449_029)
    parser.add_argument("--edges", type=int, default=61_859_140)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--classes", type=int, default=47)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument(
        "--algorithm", choices=[a.value for a in PartitionAlgorithm], default="metis"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the store here")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    figures: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}}
    steps: dict[str, dict[str, float]] = {}

    t = time.perf_counter()
    graph = generate(
        SyntheticDataset(
            num_nodes=args.nodes,
            num_edges=args.edges,
            num_features=args.features,
            num_classes=args.classes,
            seed=args.seed,
        )
    )
    steps["generate"] = {"seconds": time.perf_counter() - t, **memory()}
    figures["graph_gb"] = graph.nbytes() / GB
    print(
        f"generate   {steps['generate']['seconds']:7.1f} s   graph {graph.nbytes() / GB:.2f} GB",
        flush=True,
    )

    spec = PartitionSpec(algorithm=PartitionAlgorithm(args.algorithm), seed=args.seed)
    t = time.perf_counter()
    assignment = algorithms.assign(graph, args.parts, spec)
    steps["partition"] = {"seconds": time.perf_counter() - t, **memory()}
    print(f"partition  {steps['partition']['seconds']:7.1f} s", flush=True)

    out = args.out or Path(tempfile.mkdtemp(prefix="partition-bench-")) / "store"
    t = time.perf_counter()
    store = write_partitions(
        out, graph, args.parts, assignment=assignment, spec=spec, overwrite=args.out is not None
    )
    steps["write"] = {"seconds": time.perf_counter() - t, **memory()}
    print(f"write      {steps['write']['seconds']:7.1f} s   -> {out}", flush=True)

    meta = store.meta
    peak_gb = proc_status_kb("VmHWM") / (1 << 20)
    maxrss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
    partitioning_s = steps["partition"]["seconds"] + steps["write"]["seconds"]
    figures.update(
        steps=steps,
        partitioning_seconds=partitioning_s,
        peak_rss_gb=peak_gb,
        ru_maxrss_gb=maxrss_gb,
        edge_cut=meta.edge_cut,
        edge_cut_fraction=meta.edge_cut_fraction,
        balance=meta.balance,
        writer_steps=meta.extra.get("step_seconds"),
        goals={
            "partitioning_under_300s": partitioning_s < 300,
            "peak_rss_under_12gb": peak_gb < 12,
        },
    )
    print(
        f"partitioning (partition + write) {partitioning_s:.1f} s (goal < 300 s), "
        f"peak RSS {peak_gb:.2f} GB (goal < 12 GB)\n"
        f"edge cut {meta.edge_cut:,} of {meta.num_undirected_edges:,} edges "
        f"({100 * meta.edge_cut_fraction:.1f}%), balance "
        + ", ".join(f"{k} {v:.3f}" for k, v in meta.balance.items())
    )
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    if args.out is None:
        shutil.rmtree(out.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
