"""Calibration of the capacity plan's memory and byte figures against a real ``distgnn run``.

Runs a products-shaped synthetic job at a fraction of products scale on CPU (gloo), in worker
mode and in server-client mode, one epoch, 3-layer GraphSAGE, hidden 256, fanout 15/10/5.
While it runs it reads every workload process's peak RSS (VmHWM, by role and rank from its
contract environment) and scrapes its /metrics: the trainers' remote feature bytes and
sampled nodes, the samplers' bytes sent and requests. Evaluation is full-neighbourhood only
(``evalEvery: 0``, ``evaluation: full``), so every sampled mini-batch is a training one.
It prints the model's figures (``distgnn plan --json``) beside the measured ones.

    python benchmarks/capacity/runtime_calibration.py --scale 0.01 \\
        --out benchmarks/capacity/results/runtime-cpu-0.01.json
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from cuda_phases import collect
from process_probes import (
    RSS_KINDS,
    contract_of,
    descendants,
    gpu_used_by_card,
    gpu_used_by_pid,
    scrape,
    vm_status,
)

PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140
CLI = (sys.executable, "-P", "-m", "distgnn_operator.cli")
"""``distgnn``, as a module (the device machine has the packages on PYTHONPATH, no script)."""


def job(
    scale: float, mode: str, batch: int, gpus: int = 0, algorithm: str = "metis"
) -> dict[str, Any]:
    """The calibration job: on CPU 2 trainers (and 2 samplers in server mode); with ``gpus``
    one trainer per GPU (and one sampler per GPU, on it), bf16, as the GPU examples run."""
    server = mode == "server"
    pods = gpus or 2
    return {
        "apiVersion": "distgnn.io/v1alpha1",
        "kind": "DistGNNJob",
        "metadata": {"name": f"calibrate-{mode}"},
        "spec": {
            "dataset": {
                "synthetic": {
                    "numNodes": round(PRODUCTS_NODES * scale),
                    "numEdges": round(PRODUCTS_EDGES * scale),
                }
            },
            "partition": {"algorithm": algorithm, "numPartitions": 2},
            "samplers": {
                "replicas": pods if server else 0,
                "gpusPerPod": 1 if gpus else 0,
                "workers": 1,
            },
            "trainers": {"replicas": pods, "gpusPerPod": 1 if gpus else 0, "prefetch": 2},
            "model": {"arch": "sage", "hiddenChannels": 256, "numLayers": 3, "fanout": [15, 10, 5]},
            "training": {
                "epochs": 1,
                "batchSize": batch,
                "evalEvery": 0,
                "evaluation": {"test": "full", "validation": "full"},
                **({"bf16": True} if gpus else {}),
            },
            "storage": {"size": "50Gi"},
        },
    }


def run(
    scale: float,
    mode: str,
    batch: int,
    work: Path,
    *,
    gpus: int = 0,
    algorithm: str = "metis",
    timeout: float | None = None,
) -> dict[str, Any]:
    manifest = job(scale, mode, batch, gpus, algorithm)
    path = work / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    log_path = work / f"{mode}.log"
    run_dir = work / "runs" / mode  # its stats file and logs; the store in data/ is reused
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [*CLI, "run", str(path), "--data-dir", str(work / "data"), "--gpus", str(gpus)]
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [*command, "--run-dir", str(run_dir)],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            text=True,
        )
        result = _watch(proc, manifest, gpus, timeout)
    err = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"distgnn run failed ({proc.returncode}): {err[-2000:]}")
    metas = list((work / "data").glob("partitions/*/META.json"))
    meta = json.loads(metas[0].read_text()) if metas else None
    cut = meta["edge_cut_fraction"] if meta else None
    phases = collect(run_dir)  # GPU memory by process and phase (none on CPU)
    return {
        "mode": mode,
        "scale": scale,
        **result,
        **({"cuda_memory": phases} if phases else {}),
        "batch": batch,
        "job": manifest,
        "edge_cut_fraction": cut,
        "meta": meta,
        "log_tail": err.splitlines()[-60:],
    }


def _watch(
    proc: subprocess.Popen[str], manifest: dict[str, Any], gpus: int, timeout: float | None
) -> dict[str, Any]:
    """Every workload process's peak RSS, RSS over time, GPU memory (with ``gpus``) and
    counters, until ``distgnn run`` exits (or is stopped at ``timeout``)."""
    peak: dict[str, int] = {}
    gpu_peak: dict[str, int] = {}
    card_peak: dict[str, int] = {}
    timeline: dict[str, list[tuple[float, ...]]] = {}
    counters: dict[str, dict[str, float]] = {}
    started, started_at = time.monotonic(), time.time()
    while proc.poll() is None:
        if timeout is not None and time.monotonic() - started > timeout:
            proc.terminate()  # the supervisor stops its processes on SIGTERM
            proc.wait(60)
            raise SystemExit(f"{manifest['metadata']['name']}: no end within {timeout:.0f} s")
        on_gpu = gpu_used_by_pid() if gpus else {}
        for card, used in (gpu_used_by_card() if gpus else {}).items():
            card_peak[card] = max(card_peak.get(card, 0), used)
        for pid in descendants(proc.pid):
            who = contract_of(pid)
            if who is None:
                continue
            role, rank, port = who
            key = f"{role}-{rank}"
            status = vm_status(pid)
            peak[key] = max(peak.get(key, 0), status.get("VmHWM", 0))
            if pid in on_gpu:
                gpu_peak[key] = max(gpu_peak.get(key, 0), on_gpu[pid])
            if "VmRSS" in status:
                at = round(time.monotonic() - started, 1)
                kinds = tuple(status.get(k, 0) for k in RSS_KINDS)
                timeline.setdefault(key, []).append((at, *kinds))
            if port and role != "partition":
                got = scrape(port)
                if got:
                    counters[key] = got
        time.sleep(0.5)
    return {
        "wall_s": time.monotonic() - started,
        "started_at": started_at,
        "peak_rss_bytes": peak,
        **({"peak_gpu_bytes": gpu_peak, "peak_card_bytes": card_peak} if gpus else {}),
        "rss_timeline": {k: v[:: max(1, len(v) // 300)] for k, v in timeline.items()},
        "counters": counters,
    }


def model_plan(
    manifest: dict[str, Any], edge_cut: float | None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``distgnn plan --json`` of the job given the store's META.json (``--meta``: the edge
    cut and the sampling probe), or only its measured edge cut for runs recorded without it,
    with the model as it is now."""
    with (
        tempfile.NamedTemporaryFile("w", suffix=".yaml") as f,
        tempfile.NamedTemporaryFile("w", suffix=".json") as m,
    ):
        f.write(yaml.safe_dump(manifest))
        f.flush()
        if meta is not None:
            m.write(json.dumps(meta))
            m.flush()
            given = ["--meta", m.name]
        else:
            given = [] if edge_cut is None else ["--edge-cut", str(edge_cut)]
        done = subprocess.run(
            [*CLI, "plan", "--json", *given, f.name], capture_output=True, text=True, check=True
        )
    return dict(json.loads(done.stdout))


def compare(r: dict[str, Any]) -> dict[str, Any]:
    plan = model_plan(r["job"], r.get("edge_cut_fraction"), r.get("meta"))
    roles = {x["role"]: x for x in plan["roles"]}
    out: dict[str, Any] = {"memory": {}, "bytes": {}}
    for key, measured in r["peak_rss_bytes"].items():
        role = key.split("-")[0]
        if role in roles:
            model = roles[role]["hostBytesPerPod"]
            out["memory"][key] = {"measured": measured, "model": model,
                                  "error": model / measured - 1}  # fmt: skip
    for key, measured in r.get("peak_gpu_bytes", {}).items():
        role = key.split("-")[0]
        if role in roles and measured:
            model = roles[role]["gpuBytesPerCard"]
            out.setdefault("gpu_memory", {})[key] = {
                "measured": measured, "model": model, "error": model / measured - 1}  # fmt: skip
    for card, measured in r.get("peak_card_bytes", {}).items():
        # one trainer per GPU, and in server mode one sampler on it too (job(gpus=...))
        model = sum(x["gpuBytesPerCard"] for x in roles.values() if x["role"] != "partition")
        if measured:
            out.setdefault("gpu_memory", {})[f"{card} (all processes)"] = {
                "measured": measured, "model": model, "error": model / measured - 1}  # fmt: skip
    per_batch = plan["bytesPerBatch"]
    g = plan["graph"]
    # the bytes a feature value moves as: 2 under bf16 (holders keep and send bf16 rows)
    row = g["num_features"] * plan.get("featureBytes", 4)
    for key, c in r["counters"].items():
        if key.startswith("trainer"):
            steps = math.ceil(c.get("distgnn_trainer_seeds_total", 0) / r["batch"])
            if steps:
                measured = c.get("distgnn_trainer_remote_feature_bytes_total", 0) / steps
                if r["mode"] == "worker":
                    # rows fetched from other holders; the model counts their ids too
                    model = per_batch["remote feature rows"] * row / (row + 8)
                    what = "remote feature bytes/batch"
                else:
                    # every feature row of the batches a sampler sent
                    model = sum(plan["expectedNodesPerHop"]) * row
                    what = "batch feature bytes/batch"
                out["bytes"][f"{key} {what}"] = {
                    "measured": measured, "model": model,
                    "error": model / measured - 1 if measured else None}  # fmt: skip
            if steps:
                measured = c.get("distgnn_trainer_sampled_nodes_total", 0) / steps
                model = sum(plan["expectedNodesPerHop"])
                out["bytes"][f"{key} sampled nodes/batch"] = {
                    "measured": measured, "model": model, "error": model / measured - 1}  # fmt: skip
            lookups = c.get("distgnn_trainer_feature_cache_lookups_total", 0)
            if lookups:
                measured = c.get("distgnn_trainer_feature_cache_hits_total", 0) / lookups
                probe = (r.get("meta") or {}).get("sampling_probe")
                row_ = {"measured": measured}
                if probe:  # the hit rate the partition Job's probe measured on the store
                    model = probe["cache_hit_rate"]
                    row_.update(model=model, error=model / measured - 1 if measured else None)
                out["bytes"][f"{key} cache hit rate"] = row_
        if key.startswith("sampler"):
            # batches and the feature rows other samplers fetch share one counter
            reqs = sum(v for k, v in c.items() if 'kind="batch"' in k)
            if reqs:
                measured = c.get("distgnn_sampler_bytes_sent_total", 0) / reqs
                model = per_batch["mini-batches (sampler to trainer)"] + per_batch.get(
                    "remote feature rows", 0.0
                ) * row / (row + 8)
                out["bytes"][f"{key} bytes sent/mini-batch"] = {
                    "measured": measured, "model": model, "error": model / measured - 1}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument(
        "--batch",
        type=int,
        help="seeds per batch (default: 1024 x scale, so that a batch draws the same share "
        "of the graph as 1024 seeds of products)",
    )
    parser.add_argument("--modes", nargs="+", default=["worker", "server"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--measured", type=Path, help="recompare the runs of an earlier --out")
    args = parser.parse_args()
    results = []
    if args.measured:
        results = json.loads(args.measured.read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="capacity-runtime-") as tmp:
            for mode in args.modes:
                batch = args.batch or max(1, round(1024 * args.scale))
                results.append(run(args.scale, mode, batch, Path(tmp)))
    for r in results:
        r["comparison"] = compare(r)
        for kind, rows in r["comparison"].items():
            for key, v in rows.items():
                err = v.get("error")
                print(f"{r['mode']:7} {kind:7} {key:40} measured {v['measured']:>14,.1f} "
                      f"model {v.get('model', float('nan')):>14,.1f} "
                      f"error {'' if err is None else f'{err:+.0%}'}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
