"""benchmarks/gpu/pyg_baseline.py at toy scale on CPU: the best-effort sweep's records.

The script runs as it does on the GPU machine, as its own process, with NodeLoader over our
sampler (``--sampler distgnn``) instead of NeighborLoader (torch-sparse is not installed
here). The per-hop counts that trimming derives from torch-sparse's output are checked
against a sample laid out the way torch-sparse's ``neighbor_sample`` lays it out.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.support.scripts import load_script

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(180)]

GPU_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"
BATCH = 64
REPEATS = 3


@pytest.fixture(scope="module")
def best_sweep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("pyg") / "pyg.jsonl"
    cmd = [
        sys.executable,
        "-P",
        str(GPU_BENCH / "pyg_baseline.py"),
        "--setup=best",
        "--device=cpu",
        "--sampler=distgnn",
        "--nodes=1000",
        "--edges=4000",
        "--features=4",
        "--classes=3",
        "--hidden=8",
        "--fanout",
        "4",
        "3",
        "2",
        f"--batch-size={BATCH}",
        "--workers",
        "0",
        "1",
        "--precision",
        "fp32",
        "bf16",
        "--trim",
        "off",
        "on",
        f"--repeats={REPEATS}",
        "--warmup=1",
        "--step-batches=2",
        "--step-passes=1",
        f"--out={out}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stdout = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    written = [json.loads(line) for line in out.read_text().splitlines()]
    return {"stdout": stdout, "records": written, "stderr": proc.stderr}


def _configs(records: list[dict[str, Any]], bench: str) -> list[dict[str, Any]]:
    return [r for r in records if r["bench"] == bench]


def _check_spread(rec: dict[str, Any]) -> None:
    rates = [run["seeds_per_s"] for run in rec["runs"]]
    assert rec["repeats"] == rec["repeats_requested"] == REPEATS == len(rates)
    assert all(r > 0 for r in rates)
    assert rec["seeds_per_s"] == pytest.approx(statistics.median(rates))
    assert rec["seeds_per_s_min"] == min(rates)
    assert rec["seeds_per_s_max"] == max(rates)
    assert rec["seeds_per_s_min"] <= rec["seeds_per_s"] <= rec["seeds_per_s_max"]
    assert rec["spread"] == pytest.approx((max(rates) - min(rates)) / rec["seeds_per_s"])
    assert math.isfinite(rec["last_loss"])


def test_best_sweep_writes_one_record_per_configuration(best_sweep: dict[str, Any]) -> None:
    records = best_sweep["records"]
    assert records == best_sweep["stdout"]
    env = _configs(records, "pyg_env")
    assert len(env) == 1
    assert env[0]["setup"] == "best"
    assert env[0]["workers"] == [0, 1]
    assert not _configs(records, "pyg_skipped")

    train = _configs(records, "pyg_train")
    seen = {(r["workers"], r["precision"], r["trim"]) for r in train}
    assert len(train) == len(seen) == 8
    assert seen == {(w, p, t) for w in (0, 1) for p in ("fp32", "bf16") for t in (False, True)}
    epoch_batches = math.ceil(env[0]["train_nodes"] / BATCH)
    for rec in train:
        assert rec["setup"] == "best"
        assert rec["timing"] == "epochs"
        assert rec["per_run"] == 1
        # whole epochs: every run covers every training seed once
        assert [run["batches"] for run in rec["runs"]] == [epoch_batches] * REPEATS
        _check_spread(rec)


def test_best_sweep_reports_the_step_alone(best_sweep: dict[str, Any]) -> None:
    step = _configs(best_sweep["records"], "pyg_step")
    assert {(r["precision"], r["trim"]) for r in step} == {
        (p, t) for p in ("fp32", "bf16") for t in (False, True)
    }
    for rec in step:
        assert rec["timing"] == "step"
        assert [run["batches"] for run in rec["runs"]] == [2] * REPEATS
        assert rec["data_wait_share"] == 0.0
        _check_spread(rec)
    table = best_sweep["stderr"]
    assert "seeds/s" in table
    assert sum(line.startswith(("pyg_train", "pyg_step")) for line in table.splitlines()) == 12


def _pyg_setups() -> ModuleType:
    # it imports synthetic_gpu beside it
    return load_script(GPU_BENCH / "pyg_setups.py", "pyg_setups", beside=True)


def _torch_sparse_like_sample(
    seeds: list[int], fanouts: list[int], seed: int
) -> tuple[torch.Tensor, torch.Tensor, int, list[int], list[int]]:
    """A sample in torch-sparse's layout, with the per-hop counts recorded as it grows.

    Each hop visits the previous hop's new nodes in order; every sampled neighbour becomes
    an edge (source = its local id, target = the visited node), new neighbours are appended.
    """
    g = torch.Generator().manual_seed(seed)
    num_nodes = 300
    local = {v: i for i, v in enumerate(seeds)}
    nodes = list(seeds)
    rows: list[int] = []
    cols: list[int] = []
    per_hop_nodes, per_hop_edges = [len(seeds)], []
    begin, end = 0, len(nodes)
    for fanout in fanouts:
        edges_before = len(rows)
        for i in range(begin, end):
            degree = int(torch.randint(0, 6, (1,), generator=g))  # some nodes have none
            picks = torch.randint(0, num_nodes, (min(degree, fanout),), generator=g).tolist()
            for v in picks:
                if v not in local:
                    local[v] = len(nodes)
                    nodes.append(v)
                rows.append(local[v])
                cols.append(i)
        per_hop_edges.append(len(rows) - edges_before)
        per_hop_nodes.append(len(nodes) - end)
        begin, end = end, len(nodes)
    return torch.tensor(rows), torch.tensor(cols), len(nodes), per_hop_nodes, per_hop_edges


@pytest.mark.parametrize("seed", range(5))
def test_hop_counts_are_derived_from_torch_sparse_order(seed: int) -> None:
    setups = _pyg_setups()
    seeds = list(range(0, 40, 3))
    row, col, num_nodes, want_nodes, want_edges = _torch_sparse_like_sample(seeds, [5, 4, 3], seed)
    nodes, edges = setups.hop_counts_from_order(row, col, len(seeds), num_nodes, 3)
    assert (nodes, edges) == (want_nodes, want_edges)
    assert sum(nodes) == num_nodes
    assert sum(edges) == row.numel()


def test_hop_counts_refuse_a_sample_out_of_hop_order() -> None:
    setups = _pyg_setups()
    row, col, num_nodes, _, _ = _torch_sparse_like_sample([1, 2, 3, 4], [5, 4], 0)
    perm = torch.randperm(row.numel(), generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="hop order"):
        setups.hop_counts_from_order(row[perm], col[perm], 4, num_nodes, 2)
    with pytest.raises(ValueError, match="hop by hop"):
        setups.hop_counts_from_order(row, col, 4, num_nodes + 1, 2)
