"""benchmarks/capacity's GPU calibration without a GPU: the GPU memory records by phase are
read from a run directory laid out as a GPU run leaves it (the trainers' stats file, the
samplers' logs; the figures are made up, in a GPU run's proportions) and printed beside
nvidia-smi's; recorded runs, with and without those records, are compared again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from distgnn_workload.runtime.cuda_memory import LOG_PREFIX
from tests.support.scripts import load_script

pytestmark = pytest.mark.benchmark

CAPACITY = Path(__file__).resolve().parents[2] / "benchmarks" / "capacity"
GIB = 2**30
TOTAL = 140 * GIB


def _record(
    allocated: float, allocated_peak: float, reserved_peak: float, used: float
) -> dict[str, int]:
    return {
        "allocated": int(allocated * GIB),
        "allocated_peak": int(allocated_peak * GIB),
        "reserved": int(reserved_peak * GIB) - 2**20,
        "reserved_peak": int(reserved_peak * GIB),
        "active_peak": int(allocated_peak * GIB) + 4096,
        "alloc_retries": 0,
        "card_free": TOTAL - int(used * GIB),
        "card_total": TOTAL,
    }


TRAINER = {
    "setup": _record(2.1, 2.4, 2.6, 8.0),
    "first_steps": _record(3.0, 5.2, 5.9, 12.1),
    "training": _record(3.0, 6.0, 6.5, 14.9),
    "evaluation": _record(2.2, 4.1, 6.5, 15.2),
    "overall": _record(2.2, 6.0, 6.5, 15.2),
}
SAMPLER = {"setup": _record(2.9, 3.1, 3.3, 8.0), "shutdown": _record(2.9, 3.6, 3.7, 15.2)}


def _cuda_phases() -> ModuleType:
    return load_script(CAPACITY / "cuda_phases.py", "cuda_phases")


def _gpu_run_dir(run_dir: Path) -> None:
    """The stats file and logs of a one-GPU server-client run, as the workload writes them."""
    (run_dir / "logs").mkdir(parents=True)
    stats = {
        "world_size": 1,
        "epochs": [{"epoch": 1, "seeds": 196615}],
        "cuda_memory": {"0": TRAINER},
    }
    (run_dir / "training_stats.json").write_text(json.dumps(stats))
    lines = [
        "2026-11-26 20:01:02,003 sampler-0 INFO distgnn_workload.sampler.server: sampler 0 "
        "serving on cuda:0",
    ]
    for phase, rec in SAMPLER.items():
        lines.append(
            "2026-11-26 20:01:02,004 sampler-0 INFO distgnn_workload.sampler.server: "
            + LOG_PREFIX
            + json.dumps({"phase": phase, **rec})
        )
    lines.append("2026-11-26 20:03:00,000 sampler-0 INFO distgnn_workload.sampler.server: exits")
    (run_dir / "logs" / "sampler-0.log").write_text("\n".join(lines) + "\n")
    (run_dir / "logs" / "trainer-0.log").write_text("no records in a trainer's log\n")


def test_records_are_collected_by_process_and_placed_against_nvidia_smi(tmp_path: Path) -> None:
    phases = _cuda_phases()
    _gpu_run_dir(tmp_path)
    got = phases.collect(tmp_path)
    assert list(got) == ["trainer-0", "sampler-0"]
    assert got["trainer-0"] == TRAINER
    assert list(got["sampler-0"]) == ["setup", "shutdown", "overall"]
    assert got["sampler-0"]["overall"]["reserved_peak"] == SAMPLER["shutdown"]["reserved_peak"]
    assert got["sampler-0"]["overall"]["card_free"] == SAMPLER["shutdown"]["card_free"]
    smi = {"trainer-0": int(11.44 * GIB), "sampler-0": int(3.98 * GIB)}
    record: dict[str, Any] = {
        "mode": "server",
        "gpus": 1,
        "peak_gpu_bytes": smi,
        "cuda_memory": got,
    }
    outside = phases.outside_allocator(record)
    assert outside["trainer-0"]["outside"] == smi["trainer-0"] - TRAINER["overall"]["reserved_peak"]
    assert outside["sampler-0"]["reserved_peak"] == SAMPLER["shutdown"]["reserved_peak"]
    text = "\n".join(phases.phase_lines(record))
    assert "server  trainer-0 GPU memory by phase (GiB)" in text
    # the training phase: allocated, its peak, reserved, reserved peak (GiB), card used
    assert "training            3.00        6.00        6.50        6.50        6.00" in text
    assert "15.20" in text
    assert "trainer-0: nvidia-smi 11.44 GiB - allocator reserved peak 6.50 GiB = 4.94 GiB" in text
    assert "sampler-0: nvidia-smi 3.98 GiB - allocator reserved peak 3.70 GiB = 0.28 GiB" in text


def test_one_card_without_process_figures_is_placed_as_a_whole(tmp_path: Path) -> None:
    phases = _cuda_phases()
    _gpu_run_dir(tmp_path)
    card = int(16.0 * GIB)
    record = {
        "mode": "server",
        "gpus": 1,
        "peak_gpu_bytes": {},
        "peak_card_bytes": {"card-0": card},
        "cuda_memory": phases.collect(tmp_path),
    }
    outside = phases.outside_allocator(record)
    both = TRAINER["overall"]["reserved_peak"] + SAMPLER["shutdown"]["reserved_peak"]
    assert outside == {
        "card-0 (all processes)": {
            "nvidia_smi": card,
            "reserved_peak": both,
            "outside": card - both,
        }
    }


def test_nothing_is_collected_from_a_cpu_run(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "training_stats.json").write_text(json.dumps({"world_size": 2, "epochs": []}))
    (tmp_path / "logs" / "sampler-0.log").write_text("sampler 0 serving on cpu\n")
    phases = _cuda_phases()
    assert phases.collect(tmp_path) == {}
    assert phases.phase_lines({"mode": "worker", "cuda_memory": {}}) == []


def test_recorded_runs_with_and_without_the_records_are_compared_again(tmp_path: Path) -> None:
    recorded = CAPACITY / "results" / "gpu-h200-1.jsonl"
    old = [json.loads(line) for line in recorded.read_text().splitlines() if line.strip()]
    server = next(r for r in old if r["mode"] == "server")
    assert "cuda_memory" not in server  # recorded before the phases were
    _gpu_run_dir(tmp_path / "run")
    new = {**server, "cuda_memory": _cuda_phases().collect(tmp_path / "run")}
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(r) + "\n" for r in [*old, new]))
    done = subprocess.run(
        [sys.executable, str(CAPACITY / "gpu_calibration.py"), "--measured", str(runs)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout.splitlines()
    assert sum("gpu_memory trainer-0" in line for line in out) == 3  # worker, server, server
    assert sum("GPU memory by phase" in line for line in out) == 2  # the new record only
    smi = server["peak_gpu_bytes"]["trainer-0"] / GIB
    outside = smi - TRAINER["overall"]["reserved_peak"] / GIB
    assert any(
        f"trainer-0: nvidia-smi {smi:.2f} GiB" in line and f"= {outside:.2f} GiB outside" in line
        for line in out
    )
