"""The link benchmark's targets from its JSON lines (``bench.py`` and ``pyg_link.py`` of one
call): ours against best-effort PyG per GPU, the 1 -> 2 GPU scaling, and the ranking time.

- **x best-effort PyG**: each configuration's median positive edges/s per GPU over the
  fastest best-effort PyG run of the call (any worker count, the same precision, else any);
  target: >= 10x in bf16 on 1 GPU (worker mode).
- **scaling**: median positives/s (all GPUs) on 2 GPUs over that on 1, per mode and
  precision, runs of this call only; target: >= 1.8x (worker, bf16).
- **ranking**: the final evaluation's wall time on 2 GPUs (the fastest 2-GPU run): it ranks
  valid and test, each ``--eval-positives`` positives against ``--eval-negatives`` fixed
  negatives, after the full-neighbourhood embeddings of every node; target: under 60 s for
  100k positives (the figure covers 2 x 100k: an upper bound).

The targets and the reading of JSON lines are the heterogeneous benchmark's
(``benchmarks/gpu_hetero/ratios.py``).

    python benchmarks/gpu_link/link_ratios.py results/link.jsonl results/pyg-link.jsonl
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu_hetero"))

from ratios import (
    SCALING_TARGET,
    SPEED_TARGET,
    best_pyg,
    cli,
    ok_runs,
    runs_and_scaling,
    spread,
    targets_line,
)

RANKING_TARGET_S = 60.0

Key = tuple[str, int, str]


def _medians(runs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out = {}
    for key, rs in ok_runs(runs, "syntheticLink").items():
        per_gpu = [r["positives_per_s_per_gpu"] for r in rs]
        evals = [r["final_ranking_eval_s"] for r in rs if r.get("final_ranking_eval_s")]
        mrr = [r["test_mrr"] for r in rs if r.get("test_mrr") is not None]
        out[key] = {
            **spread(per_gpu),
            "total": statistics.median(p * key[1] for p in per_gpu),
            "test_mrr": statistics.median(mrr) if mrr else None,
            "ranking_s": min(evals) if evals else None,
        }
    return out


def compute(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the ratio table, and which targets are met (None: not measured)."""
    ours = _medians([r for r in rows if r.get("bench") == "link_run"])
    pyg = [r for r in rows if r.get("bench") == "pyg_link_train"]
    runs, scaling = runs_and_scaling(ours, pyg, "positives_per_s")
    headline = ours.get(("worker", 1, "bf16"))
    ref = best_pyg(pyg, "bf16", "positives_per_s")
    worker_bf16 = [s for s in scaling if (s["mode"], s["precision"]) == ("worker", "bf16")]
    two = [m["ranking_s"] for (_, g, _), m in ours.items() if g == 2 and m["ranking_s"]]
    ranking_s = min(two) if two else None
    targets = {
        "speed": None
        if headline is None or ref is None
        else headline["per_gpu"] / ref["positives_per_s"] >= SPEED_TARGET,
        "scaling": None if not worker_bf16 else worker_bf16[0]["speedup"] >= SCALING_TARGET,
        "ranking": None if ranking_s is None else ranking_s < RANKING_TARGET_S,
    }
    return {
        "runs": runs,
        "pyg": pyg,
        "scaling": scaling,
        "ranking_s": ranking_s,
        "targets": targets,
    }


def render(result: dict[str, Any]) -> str:
    lines = ["run                 positives/s/GPU median (min-max)  x best PyG  test MRR  rank s"]
    for r in result["runs"]:
        name = f"{r['mode']}-{r['gpus']}-{r['precision']} ({r['runs']})"
        times = "-" if r["times_pyg"] is None else f"{r['times_pyg']:.1f}x"
        mrr = "-" if r["test_mrr"] is None else f"{r['test_mrr']:.3f}"
        rank = "-" if r["ranking_s"] is None else f"{r['ranking_s']:.1f}"
        lines.append(
            f"{name:<20}{r['per_gpu']:>14,.0f} ({r['min']:,.0f}-{r['max']:,.0f})"
            f"{times:>12}{mrr:>10}{rank:>8}"
        )
    for p in result["pyg"]:
        lines.append(
            f"PyG {p['setup']:<5} {p['workers']:>2} workers {p['precision']}: "
            f"{p['positives_per_s']:,.0f} positives/s ({p['batches']} batches)"
        )
    for s in result["scaling"]:
        lines.append(
            f"scaling {s['mode']} {s['precision']} 1 -> {s['gpus']} GPUs: {s['speedup']:.2f}x"
        )
    ranking = f"ranking on 2 GPUs under {RANKING_TARGET_S:g} s"
    lines.append(targets_line(result["targets"], " per GPU", ranking, "ranking"))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:], "link_ratios.py", compute, render))
