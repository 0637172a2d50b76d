"""Calibration of the capacity plan's partition Job: measured peak memory and time against
the model (``distgnn_api.partition_cost``), at fractions of the products-scale graph.

For each scale it generates the synthetic products-shaped graph, partitions it (METIS by
default) and writes the store, as the partition Job does, recording per step the wall time,
the process's CPU time (user + system: robust to other processes sharing the cores) and the
peak RSS (VmHWM); then it prints the model's figures beside them with the relative error.

    python benchmarks/capacity/partition_calibration.py --scales 0.01 0.1 1 \\
        --out benchmarks/capacity/results/partition-cpu.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from distgnn_api.graph_size import GraphSize
from distgnn_api.partition_cost import partition_cost
from distgnn_api.spec import PartitionAlgorithm, parse_spec

GIB = 1 << 30
PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140


def vm_hwm() -> int:
    """Peak resident bytes of this process (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(scale: float, parts: int, algorithm: str) -> dict[str, Any]:
    """One scale in a fresh process (peak RSS is per process): run this script per scale."""
    from distgnn_api.spec import PartitionSpec, SyntheticDataset
    from distgnn_workload.data.synthetic import generate
    from distgnn_workload.partition import algorithms, write_partitions

    nodes, edges = round(PRODUCTS_NODES * scale), round(PRODUCTS_EDGES * scale)
    steps: dict[str, dict[str, float]] = {}
    base = vm_hwm()

    def step(name: str, t0: float, c0: float) -> None:
        steps[name] = {
            "wall_s": time.perf_counter() - t0,
            "cpu_s": cpu_seconds() - c0,
            "peak_rss_bytes": vm_hwm(),
        }

    t, c = time.perf_counter(), cpu_seconds()
    graph = generate(SyntheticDataset(num_nodes=nodes, num_edges=edges))
    step("generate", t, c)
    spec = PartitionSpec(algorithm=PartitionAlgorithm(algorithm))
    t, c = time.perf_counter(), cpu_seconds()
    assignment = algorithms.assign(graph, parts, spec)
    step("partition", t, c)
    out = Path(tempfile.mkdtemp(prefix="capacity-calibration-")) / "store"
    t, c = time.perf_counter(), cpu_seconds()
    store = write_partitions(out, graph, parts, assignment=assignment, spec=spec)
    step("write", t, c)
    store_bytes = sum(f.stat().st_size for f in out.rglob("*.npy"))
    shutil.rmtree(out.parent, ignore_errors=True)
    return {
        "scale": scale,
        "nodes": nodes,
        "stored_edges": graph.num_edges,
        "partitions": parts,
        "algorithm": algorithm,
        "process_bytes_before": base,
        "steps": steps,
        "peak_rss_bytes": vm_hwm(),
        "store_bytes": store_bytes,
        "edge_cut_fraction": store.meta.edge_cut_fraction,
    }


def compare(m: dict[str, Any]) -> dict[str, Any]:
    """The model's figures for a measured run, and the relative errors."""
    spec = parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": m["nodes"], "numEdges": m["stored_edges"] // 2}},
            "partition": {"algorithm": m["algorithm"], "numPartitions": m["partitions"]},
            "samplers": {"replicas": m["partitions"]},
        }
    )
    g = GraphSize(m["nodes"], m["stored_edges"], 100, 47, 0, "calibration")
    cost = partition_cost(spec, g)
    cpu = sum(s["cpu_s"] for s in m["steps"].values())
    wall = sum(s["wall_s"] for s in m["steps"].values())
    return {
        "model_peak_bytes": cost.peak_bytes,
        "model_seconds": cost.seconds,
        "model_store_bytes": cost.store_bytes,
        "peak_error": cost.peak_bytes / m["peak_rss_bytes"] - 1,
        "seconds_error_vs_cpu": cost.seconds / cpu - 1,
        "seconds_error_vs_wall": cost.seconds / wall - 1,
        "store_error": cost.store_bytes / m["store_bytes"] - 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument(
        "--algorithm", default="metis", choices=[a.value for a in PartitionAlgorithm]
    )
    parser.add_argument("--one", type=float, help=argparse.SUPPRESS)  # a child run
    parser.add_argument("--out", type=Path, help="write the runs and errors here (JSON)")
    parser.add_argument("--measured", type=Path, help="recompare the runs of an earlier --out")
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.parts, args.algorithm)))
        return
    import subprocess
    import sys

    if args.measured:
        runs = [r["measured"] for r in json.loads(args.measured.read_text())["runs"]]
    else:
        runs = []
        for scale in args.scales:
            cmd = [sys.executable, "-P", __file__, "--one", str(scale), "--parts", str(args.parts),
                   "--algorithm", args.algorithm]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    report = {"runs": [{"measured": m, "model": compare(m)} for m in runs]}
    print(f"{'scale':>6} {'peak GiB':>9} {'model':>7} {'err':>6} {'cpu s':>7} {'wall s':>7} "
          f"{'model s':>8} {'err cpu':>8} {'store err':>9}")  # fmt: skip
    for r in report["runs"]:
        m, p = r["measured"], r["model"]
        cpu = sum(s["cpu_s"] for s in m["steps"].values())
        wall = sum(s["wall_s"] for s in m["steps"].values())
        print(
            f"{m['scale']:>6g} {m['peak_rss_bytes'] / GIB:>9.2f} {p['model_peak_bytes'] / GIB:>7.2f} "
            f"{p['peak_error']:>+6.0%} {cpu:>7.1f} {wall:>7.1f} {p['model_seconds']:>8.1f} "
            f"{p['seconds_error_vs_cpu']:>+8.0%} {p['store_error']:>+9.1%}"
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
