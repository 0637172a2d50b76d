"""benchmarks/gpu_link at toy scale on CPU: bench.py (the job's partition step, then its
trainers and samplers started through distgnn run's launch plan) in worker and server-client
mode, then pyg_link.py on the store it kept (LinkLoader over our sampler: pyg-lib and
torch-sparse are not installed here). What is checked is the records' shape and that the runs
finished; no timing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(480)]

LINK_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_link"


def test_link_bench_runs_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "link.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            str(LINK_BENCH / "bench.py"),
            "--device=cpu",
            "--scale=0.001",
            "--runs",
            "worker-1-fp32",
            "server-1-fp32",
            "--fanout",
            "5",
            "3",
            "--hidden=32",
            "--batch-size=128",
            "--eval-negatives=50",
            "--eval-positives=200",
            f"--work-dir={tmp_path / 'work'}",
            f"--out={out}",
            "--keep",
        ],
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    records: list[dict[str, Any]] = [json.loads(line) for line in out.read_text().splitlines()]
    runs = [r for r in records if r["bench"] == "link_run"]
    assert [r["run"] for r in runs] == ["worker-1-fp32", "server-1-fp32"]
    for r in runs:
        assert r["status"] == "ok", r
        assert r["positives_per_s_per_gpu"] * 4 == pytest.approx(r["seeds_per_s_per_gpu"], 0.01)
        assert 0 < r["test_mrr"] < 1
        assert r["test_positives"] == 200
        assert r["final_ranking_eval_s"] is not None
    summaries = [r for r in records if r["bench"] == "dist_summary"]
    assert {s["run"] for s in summaries} == {"worker-1-fp32", "server-1-fp32"}
    assert all("test_mrr_median" in s for s in summaries)

    # PyG's LinkLoader on the kept store, over our sampler's adapter (no pyg-lib here)
    (store,) = (tmp_path / "work" / "data" / "partitions").iterdir()
    pyg_out = tmp_path / "pyg-link.jsonl"
    for setup in ("stock", "best"):
        proc = subprocess.run(
            [
                sys.executable,
                "-P",
                str(LINK_BENCH / "pyg_link.py"),
                f"--store={store}",
                f"--setup={setup}",
                "--sampler=distgnn",
                "--device=cpu",
                "--workers=0",
                "--fanout",
                "5",
                "3",
                "--hidden=32",
                "--batch-size=128",
                "--warmup=1",
                "--batches=3",
                f"--out={pyg_out}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    pyg = [json.loads(line) for line in pyg_out.read_text().splitlines()]
    assert [r["setup"] for r in pyg] == ["stock", "best"]
    for r in pyg:
        assert r["batches"] == 3
        assert r["seeds_per_s"] == pytest.approx(4 * r["positives_per_s"], 0.01)
