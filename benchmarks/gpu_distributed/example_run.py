"""A shipped example as a user runs it: ``distgnn run EXAMPLE.yaml`` (the real command line, a
subprocess), timed; then the run's figures and, where the run recorded them, its GPU memory
per role beside what ``distgnn plan`` gives for the same job and store.

``--set key=value`` changes one field of the example before the run (a dotted path under
``spec``, the value read as YAML), e.g. ``--set samplers.cacheRatio=1`` for the same job with
its features replicated. Runs of one ``--data-dir`` share the partition store (its key is the
partition's section), so a second run trains on the first one's partitions. One JSON line
per run goes to ``--out``.

    python benchmarks/gpu_distributed/example_run.py manifests/examples/products-worker.yaml \\
        --data-dir /tmp/ex --label as-written --out $OUT/example.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from job_run import STATS_FILE, epoch_figures, log_tail
from records import emit

from distgnn_workload.runtime import cuda_memory


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("example", type=Path)
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--label", default="as-written")
    p.add_argument("--timeout", type=float, default=540.0)
    p.add_argument("--out", type=Path, default=None)
    return p.parse_args()


def _cli() -> list[str]:
    return [sys.executable, "-m", "distgnn_operator.cli"]


def with_changes(doc: dict[str, Any], changes: list[str]) -> dict[str, Any]:
    """``doc`` with each ``key=value`` of ``changes`` set under ``spec``."""
    for change in changes:
        key, sep, value = change.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {change!r}: give KEY=VALUE, e.g. samplers.cacheRatio=1")
        node = doc["spec"]
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value)
    return doc


def _planned(job: Path, data_dir: Path) -> dict[str, Any]:
    """``distgnn plan --json`` of the job against the store the run wrote, GPU bytes per role."""
    metas = sorted((data_dir / "partitions").glob("*/META.json"), key=lambda p: p.stat().st_mtime)
    if not metas:
        return {}
    proc = subprocess.run(
        [*_cli(), "plan", str(job), "--meta", str(metas[-1]), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {"plan_error": proc.stderr[-400:]}
    plan = json.loads(proc.stdout)
    return {r["role"]: r["gpuBytesPerCard"] for r in plan["roles"] if r["gpuBytesPerCard"]}


def main() -> None:
    args = _args()
    doc = with_changes(yaml.safe_load(args.example.read_text()), args.set)
    gpus = int(doc["spec"]["trainers"]["replicas"]) * int(
        doc["spec"]["trainers"].get("gpusPerPod", 1)
    )
    record: dict[str, Any] = {
        "bench": "example_run",
        "example": args.example.name,
        "label": args.label,
        "changes": args.set,
        "gpus": gpus,
    }
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / args.example.name
        job.write_text(yaml.safe_dump(doc))
        run_dir = Path(tmp) / "run"
        argv = [*_cli(), "run", str(job), "--data-dir", str(args.data_dir)]
        argv += ["--run-dir", str(run_dir), "--uid", str(uuid.uuid4())]
        started = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
            record["status"] = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            record["status"] = "hung"
        record["wall_s"] = round(time.perf_counter() - started, 1)
        if record["status"] == "ok":
            record |= epoch_figures(run_dir, max(gpus, 1))
            stats = json.loads((run_dir / STATS_FILE).read_text())
            record["gpu_memory_measured"] = {
                rank: {
                    k: phases[cuda_memory.OVERALL][k] for k in ("allocated_peak", "reserved_peak")
                }
                for rank, phases in (stats.get(cuda_memory.STATS_KEY) or {}).items()
            }
            record["gpu_memory_planned"] = _planned(job, args.data_dir)
        else:
            record["logs"] = {
                p.name: log_tail(p, 15) for p in sorted((run_dir / "logs").glob("*.log"))
            }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    emit(args.out, record)


if __name__ == "__main__":
    main()
