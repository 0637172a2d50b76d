"""benchmarks/gpu_link at toy scale on CPU: bench.py (the job's partition step, then its
trainers and samplers started through distgnn run's launch plan) in worker and server-client
mode, then pyg_link.py on the store it kept (LinkLoader over our sampler: pyg-lib and
torch-sparse are not installed here). What is checked is the records' shape and that the runs
finished; no timing.

bench.py runs as its own process, as on the GPU machine (it starts distgnn run's processes);
pyg_link.py's and link_ratios.py's ``main`` run in the test's process, each with the argument
list its command line would have: the same code, without an interpreter that imports torch
and PyG again for each of three short commands."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.scripts import load_script, run_script

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(480)]

LINK_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_link"


def test_link_bench_runs_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "link.jsonl"
    run_script(
        LINK_BENCH / "bench.py",
        "--device=cpu",
        "--preload",
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
        "--positives-per-gpu=300",
        "--epochs=2",
        f"--work-dir={tmp_path / 'work'}",
        f"--out={out}",
        "--keep",
        timeout=420,
    )
    records: list[dict[str, Any]] = [json.loads(line) for line in out.read_text().splitlines()]
    (env,) = [r for r in records if r["bench"] == "link_env"]
    assert env["positives_per_gpu"] == 300
    runs = [r for r in records if r["bench"] == "link_run"]
    assert [r["run"] for r in runs] == ["worker-1-fp32", "server-1-fp32"]
    for r in runs:
        assert r["status"] == "ok", r
        assert r["positives_per_s_per_gpu"] * 4 == pytest.approx(r["seeds_per_s_per_gpu"], 0.01)
        assert 0 < r["test_mrr"] < 1
        assert r["test_positives"] == 200
        assert r["final_ranking_eval_s"] is not None
        # positivesPerEpoch bounds the epochs: 300 positives, 4 seed rows each (far fewer
        # than the store's training positives). The rate and the epoch's seconds are timed over
        # slightly different windows and rounded, so their product is only near 300.
        assert r["epochs_measured"] == 1
        assert r["positives_per_s_per_gpu"] * r["epoch_s"] == pytest.approx(300, rel=0.25)
    summaries = [r for r in records if r["bench"] == "dist_summary"]
    assert {s["run"] for s in summaries} == {"worker-1-fp32", "server-1-fp32"}
    assert all("test_mrr_median" in s for s in summaries)

    # PyG's LinkLoader on the kept store, over our sampler's adapter (no pyg-lib here)
    (store,) = (tmp_path / "work" / "data" / "partitions").iterdir()
    pyg_out = tmp_path / "pyg-link.jsonl"
    pyg_link = load_script(LINK_BENCH / "pyg_link.py", "pyg_link")
    for setup in ("stock", "best"):
        argv = [
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
            "--max-seconds=600",
            f"--out={pyg_out}",
        ]
        assert pyg_link.main(argv) == 0
    pyg = [json.loads(line) for line in pyg_out.read_text().splitlines()]
    assert [r["setup"] for r in pyg] == ["stock", "best"]
    for r in pyg:
        assert r["batches"] == 3
        assert r["seeds_per_s"] == pytest.approx(4 * r["positives_per_s"], 0.01)

    # the ratio table over both files, as device_bench.sh prints it (link_ratios.py's
    # command line: cli over the files, with its compute and render)
    capsys.readouterr()
    ratios = _link_ratios()
    assert (
        ratios.cli([str(out), str(pyg_out)], "link_ratios.py", ratios.compute, ratios.render) == 0
    )
    table = capsys.readouterr().out
    assert "worker-1-fp32 (1)" in table
    assert "PyG best " in table
    assert "targets:" in table


def _link_ratios() -> ModuleType:
    return load_script(LINK_BENCH / "link_ratios.py", "link_ratios")


def _run(mode: str, gpus: int, per_gpu: float, rank_s: float) -> dict[str, Any]:
    return {
        "bench": "link_run",
        "graph": "syntheticLink",
        "status": "ok",
        "mode": mode,
        "gpus": gpus,
        "precision": "bf16",
        "positives_per_s_per_gpu": per_gpu,
        "test_mrr": 0.5,
        "final_ranking_eval_s": rank_s,
    }


def _pyg(setup: str, workers: int, rate: float) -> dict[str, Any]:
    return {
        "bench": "pyg_link_train",
        "setup": setup,
        "workers": workers,
        "precision": "bf16",
        "positives_per_s": rate,
        "batches": 100,
    }


def test_link_ratios_use_the_fastest_best_effort_pyg_medians_and_the_2_gpu_ranking() -> None:
    ratios = _link_ratios()
    rows = [
        _run("worker", 1, 30_000, 80.0),
        _run("worker", 1, 34_000, 70.0),
        _run("worker", 1, 40_000, 75.0),
        _run("worker", 2, 28_000, 50.0),
        _run("server", 2, 20_000, 65.0),
        {"bench": "link_run", "run": "server-1-bf16", "skipped": "budget"},
        _pyg("stock", 12, 9_000.0),  # stock never counts as the reference
        _pyg("best", 16, 2_000.0),
        _pyg("best", 24, 3_000.0),
    ]
    out = ratios.compute(rows)
    (one,) = [r for r in out["runs"] if (r["mode"], r["gpus"]) == ("worker", 1)]
    assert one["per_gpu"] == 34_000
    assert one["pyg_best"] == 3_000.0
    assert one["times_pyg"] == pytest.approx(34_000 / 3_000)
    (scaling,) = out["scaling"]
    assert scaling["speedup"] == pytest.approx(2 * 28_000 / 34_000)
    assert out["ranking_s"] == 50.0
    assert out["targets"] == {"speed": True, "scaling": False, "ranking": True}
    rows[3] = _run("worker", 2, 31_000, 61.0)
    rows[4] = _run("server", 2, 20_000, 62.0)
    assert ratios.compute(rows)["targets"] == {"speed": True, "scaling": True, "ranking": False}
    assert ratios.compute(rows[:5])["targets"]["speed"] is None
    assert "MISSED" in ratios.render(ratios.compute(rows))
