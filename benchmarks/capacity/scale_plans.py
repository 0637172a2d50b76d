"""The scale analysis's figures (docs/scale.md): ``distgnn plan --json`` of every example spec
under ``benchmarks/capacity/scale/``, with the seeds/s the network allows beside the
extrapolated compute figure.

    python benchmarks/capacity/scale_plans.py --out benchmarks/capacity/results/scale-plans.json

The network bound: every trainer process receives its batches' remote feature rows and
sampling replies (``bytesPerBatch``); at ``--gbps-per-gpu`` of inbound bandwidth per GPU it
completes at most ``bandwidth / bytes per batch`` batches a second. It is an upper bound
(latency, the serving side and the gradient all-reduce come on top).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SCALE = Path(__file__).parent / "scale"
GIB = 1 << 30


def plan(path: Path) -> dict[str, Any]:
    cli = str(Path(sys.executable).parent / "distgnn")
    done = subprocess.run([cli, "plan", "--json", str(path)], capture_output=True, text=True)
    if done.returncode not in (0, 3):
        raise SystemExit(f"distgnn plan {path} failed: {done.stderr}")
    return dict(json.loads(done.stdout))


def row(path: Path, gbps: list[float]) -> dict[str, Any]:
    job = yaml.safe_load(path.read_text())
    spec = job["spec"]
    p = plan(path)
    roles = {r["role"]: r for r in p["roles"]}
    t, part = roles["trainer"], roles["partition"]
    gpus = t["pods"] * max(1, t["gpusPerPod"])
    batch = spec["training"]["batchSize"]
    network = {k: v for k, v in p["bytesPerBatch"].items() if not k.startswith("gradients")}
    per_batch = sum(network.values())
    compute = p["seedsPerSecond"]["per_gpu"] if p["seedsPerSecond"] else None
    bound = {str(g): (g * 1e9 / 8) / per_batch * batch if per_batch else None for g in gbps}
    return {
        "spec": path.name,
        "gpus": gpus,
        "trainer_pods": t["pods"],
        "gpus_per_pod": t["gpusPerPod"],
        "notes": p["notes"],
        "fits": p["fits"],
        "shortfalls": [s["message"] for s in p["shortfalls"]],
        "trainer_host_gib_per_pod": t["hostBytesPerPod"] / GIB,
        "trainer_gpu_gib_per_card": t["gpuBytesPerCard"] / GIB,
        "partition_host_gib": part["hostBytesPerPod"] / GIB,
        "partition_cpu_hours": part["seconds"] / 3600,
        "volume_gib": p["volumeBytes"] / GIB,
        "network_mb_per_batch": per_batch / 1e6,
        "bytes_per_batch": p["bytesPerBatch"],
        "network_gb_per_epoch": sum(
            v for k, v in p["bytesPerEpoch"].items() if not k.startswith("gradients")
        )
        / 1e9,
        "gradient_gb_per_epoch": p["bytesPerEpoch"].get("gradients (ring all-reduce)", 0.0) / 1e9,
        "steps_per_epoch": p["stepsPerEpoch"],
        "seeds_per_s_per_gpu_compute": compute,
        "seeds_per_s_per_gpu_network_bound": bound,
        "expected_nodes_per_batch": sum(p["expectedNodesPerHop"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gbps-per-gpu", type=float, nargs="+", default=[400.0, 100.0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = [row(p, args.gbps_per_gpu) for p in sorted(SCALE.glob("*.yaml"))]
    g0, g1 = (str(g) for g in args.gbps_per_gpu[:2])
    print("| spec | GPUs (pods x GPUs) | fits | trainer host GiB/pod | GPU GiB/card | partition "
          "GiB, CPU h | network MB/batch | network GB/epoch | steps/epoch | seeds/s/GPU compute"
          f" | network bound at {g0} / {g1} Gb/s |")  # fmt: skip
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        c = r["seeds_per_s_per_gpu_compute"]
        b0, b1 = (
            r["seeds_per_s_per_gpu_network_bound"][g0],
            r["seeds_per_s_per_gpu_network_bound"][g1],
        )
        print(
            f"| {r['spec']} | {r['gpus']} ({r['trainer_pods']} x {r['gpus_per_pod']}) "
            f"| {'yes' if r['fits'] else 'no'} | {r['trainer_host_gib_per_pod']:.0f} "
            f"| {r['trainer_gpu_gib_per_card']:.1f} | {r['partition_host_gib']:.1f}, "
            f"{r['partition_cpu_hours']:.2f} | {r['network_mb_per_batch']:.0f} "
            f"| {r['network_gb_per_epoch']:.0f} | {r['steps_per_epoch']} "
            f"| {'-' if c is None else f'{c / 1000:.0f}k'} "
            f"| {'-' if b0 is None else f'{b0 / 1000:.0f}k'} / {'-' if b1 is None else f'{b1 / 1000:.0f}k'} |"
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
