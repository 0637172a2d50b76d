"""benchmarks/gpu_distributed at toy scale on CPU: worker mode with partitioned features (over
the feature exchange), replicated, and the socket-only row (its NCCL settings are inert on
gloo; what is checked is that it is reported apart). What is checked is the records' shape,
the bytes moved per step and that the runs finished; no timing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from distgnn_api.spec import SyntheticDataset
from tests.support.scripts import load_script, run_script

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(480)]

DIST_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_distributed"


def test_run_tokens_name_the_socket_only_transport() -> None:
    sys.path.insert(0, str(DIST_BENCH.parent / "gpu"))
    try:
        config = load_script(DIST_BENCH / "run_config.py", "dist_run_config", beside=True)
    finally:
        sys.path.remove(str(DIST_BENCH.parent / "gpu"))
    run = config.parse_run("worker-4-bf16-0.1-socket")
    assert (run.mode, run.gpus, run.precision, run.cache_ratio, run.socket) == (
        "worker",
        4,
        "bf16",
        0.1,
        True,
    )
    assert run.full_name == "worker-4-bf16-0.1-socket"
    assert run.env["NCCL_P2P_DISABLE"] == run.env["NCCL_SHM_DISABLE"] == "1"
    assert config.parse_run("worker-4-bf16").env == {}
    with pytest.raises(SystemExit, match="socket"):
        config.parse_run("worker-4-bf16-socket-0.1")


def test_partitioned_features_report_their_bytes_per_step(tmp_path: Path) -> None:
    out = tmp_path / "dist.jsonl"
    proc = run_script(
        DIST_BENCH / "bench.py",
        "--device=cpu",
        "--preload",
        "--nodes=4000",
        "--epochs=2",
        "--batch-size=256",
        "--fanout",
        "5",
        "3",
        "--hidden=32",
        "--runs",
        "worker-2-fp32-0.2",
        "worker-2-fp32",
        f"--work-dir={tmp_path / 'work'}",
        f"--out={out}",
        "--run-timeout=200",
        "--budget=400",
        timeout=450,
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    runs = {(r["cache_ratio"], r["transport"]): r for r in records if r["bench"] == "dist_run"}
    assert {r["status"] for r in runs.values()} == {"ok"}, runs
    assert runs[(0.2, "any")]["feature_bytes_per_step"] > 0
    assert runs[(1.0, "any")]["feature_bytes_per_step"] == 0
    # one-type steps have no embedding blocks or fitted caps to go over: none ran eagerly
    assert all(r["eager_steps"] == 0 for r in runs.values()), runs
    summaries = [r for r in records if r["bench"] == "dist_summary"]
    assert sorted(s["run"] for s in summaries) == ["worker-2-fp32", "worker-2-fp32"]
    assert all("feature_bytes_per_step_median" in s for s in summaries)
    assert "MB/step" in proc.stdout
    # every row reports its accuracy, on the graph of the spec's default homophily and noise
    defaults = SyntheticDataset()
    data = next(r for r in records if r["bench"] == "dist_data")
    assert (data["homophily"], data["feature_noise"]) == (
        defaults.homophily,
        defaults.feature_noise,
    )
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in runs.values())
    for s in summaries:
        assert s["test_accuracy_min"] <= s["test_accuracy_median"] <= s["test_accuracy_max"]
    assert "acc/MRR" in proc.stdout
