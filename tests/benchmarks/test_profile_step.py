"""benchmarks/gpu_hetero/profile_step.py at toy scale on CPU, as its own process: the
product's typed trainer (the fixed-shape step, ``DISTGNN_CUDA_GRAPH=static``) runs its
steps under the profiler and the read-back counter; no timing is checked. Beside it,
sampler_time.py (the typed sampler alone, at the bounds and at fitted caps).

On CPU a one-rank embedding lookup checks its ids on the host at once (on a GPU the check
waits on the device), so those checks must be the only read-backs the training thread's
Python makes; the GPU figures are left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_hetero" / "profile_step.py"
STEPS = 3


def test_profile_step_runs_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "profile.jsonl"
    cmd = [
        sys.executable,
        "-P",
        str(SCRIPT),
        "--device=cpu",
        "--scale=0.002",
        "--fanout",
        "5",
        "3",
        "--hidden=16",
        "--embedding-dim=8",
        "--batch-size=64",
        "--warmup=4",
        f"--steps={STEPS}",
        f"--graph-cache={tmp_path / 'graph.pkl'}",
        f"--table={tmp_path / 'table.txt'}",
        f"--out={out}",
    ]
    env = {**os.environ, "DISTGNN_CUDA_GRAPH": "static"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["bench"] == "hetero_profile_step"
    assert record["graph_step"] is True
    assert record["steps"] == STEPS
    assert record["ms_per_step"] > 0
    assert "gpu_busy_ms_per_step" not in record
    # the sampler's caps (and so the step's) fitted to the first batches, below the bounds
    assert 0 < record["sampler_slots_fitted"] < record["sampler_slots_bounds"]
    assert record["oversize_steps"] == 0
    assert (tmp_path / "graph.pkl").is_file()
    assert "Self CPU" in (tmp_path / "table.txt").read_text()
    # three featureless types: one host-side range check each per step, nothing else
    assert record["host_syncs_per_step"] == 3.0
    assert all(
        "embeddings/table.py" in s and "_lookup_local" in s for s in record["host_sync_sites"]
    )


def test_sampler_time_runs_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "sampler.jsonl"
    cmd = [
        sys.executable,
        "-P",
        str(SCRIPT.with_name("sampler_time.py")),
        "--device=cpu",
        "--scale=0.002",
        "--fanout",
        "5",
        "3",
        "--batch-size=64",
        "--batches=3",
        "--warmup=1",
        "--fit-batches=2",
        f"--out={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["execution"] for r in records] == ["bounds", "fitted"]
    assert all(r["ms_per_batch"] > 0 and r["edges_per_batch"] > 0 for r in records)
    slots = proc.stdout.splitlines()[-1]
    bounds, fitted = (int(v.replace(",", "")) for v in slots.split("bounds ")[1].split(", fitted "))
    assert 0 < fitted <= bounds
