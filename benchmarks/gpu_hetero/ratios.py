"""The heterogeneous benchmark's targets from its JSON lines (``bench.py`` and ``pyg_hetero.py``
of one call): ours against best-effort PyG per GPU, the 1 -> 2 GPU scaling, and sampled
edges per seed per edge type against PyG's.

- **x best-effort PyG**: each configuration's median seeds/s per GPU over the fastest
  best-effort PyG configuration of the call (any worker count, the same precision, else
  any); target: >= 5x in bf16 on 1 GPU (worker mode), and at least 180k seeds/s there.
- **scaling**: median seeds/s (all GPUs) on 2 GPUs over that on 1, per mode and precision,
  runs of this call only; target: >= 1.85x.
- **edges per seed**: ``|ours - PyG| / PyG`` per edge type, PyG's over the timed batches of
  all its configurations pooled, ours from our typed sampler (the trainers') over the same
  seed batches (``edges_per_seed_distgnn_same_seeds``: no seed-set noise between the two);
  target: every edge type within 2%. Shown too: ours over every training seed of the store
  (``hetero_edges_per_seed``) against the same PyG figures, and each configuration alone. The trainers' own figure (all edge types together,
  ``training_stats.json``) is shown beside ours.

    python benchmarks/gpu_hetero/ratios.py results/hetero.jsonl results/pyg-hetero.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distgnn_workload.sampling.edges_per_seed import relative_differences

SPEED_TARGET = 10.0
SCALING_TARGET = 1.8
"""The link benchmark's targets (``gpu_link/link_ratios.py``)."""
TYPED_SPEED_TARGET = 5.0
TYPED_SCALING_TARGET = 1.85
TYPED_RATE_TARGET = 180_000.0
"""The typed benchmark's targets: x best-effort PyG and seeds/s on 1 GPU, 1 -> 2 GPUs."""
EDGES_TOLERANCE = 0.02


def read(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        rows += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return rows


def ok_runs(
    runs: list[dict[str, Any]], graph: str
) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    """The finished runs on ``graph``, by configuration (mode, GPUs, precision)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("status") == "ok" and r.get("graph") == graph:
            groups.setdefault((r["mode"], r["gpus"], r["precision"]), []).append(r)
    return groups


def spread(per_gpu: list[float]) -> dict[str, Any]:
    """The number of runs, and the median, min and max of their rates per GPU."""
    return {
        "runs": len(per_gpu),
        "per_gpu": statistics.median(per_gpu),
        "min": min(per_gpu),
        "max": max(per_gpu),
    }


def cli(
    argv: list[str],
    script: str,
    compute: Callable[[list[dict[str, Any]]], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
) -> int:
    """Print the table that ``render`` makes of ``compute`` over the JSON-lines files."""
    if not argv:
        print(f"usage: {script} RESULTS.jsonl [MORE.jsonl ...]", file=sys.stderr)
        return 2
    print(render(compute(read([Path(a) for a in argv]))))
    return 0


def targets_line(
    targets: dict[str, Any],
    speed: str,
    third: str,
    third_key: str,
    *,
    speed_target: float = SPEED_TARGET,
    scaling_target: float = SCALING_TARGET,
) -> str:
    """The verdicts: ``speed`` over best-effort PyG, the 1 -> 2 GPU scaling, then ``third``."""
    return (
        f"targets: >= {speed_target:g}x best-effort PyG{speed} (worker, 1 GPU, bf16): "
        f"{verdict(targets['speed'])}; >= {scaling_target:g}x 1 -> 2 GPUs (worker, bf16): "
        f"{verdict(targets['scaling'])}; {third}: {verdict(targets[third_key])}"
    )


def _medians(runs: list[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    out = {}
    for key, rs in ok_runs(runs, "syntheticMag").items():
        out[key] = {
            **spread([r["seeds_per_s_per_gpu"] for r in rs]),
            "total": statistics.median(r["seeds_per_s"] for r in rs),
            "edges_per_seed": statistics.median(r["sampled_edges_per_seed"] for r in rs),
            "test_accuracy": statistics.median(r["test_accuracy"] for r in rs),
        }
    return out


def _pooled(pyg: list[dict[str, Any]], field: str = "edges_per_seed") -> dict[str, Any]:
    """Edges per seed per edge type (``field`` of each record) over the timed batches of the
    given PyG configurations, weighted by their seeds."""
    seeds = sum(r["seeds_counted"] for r in pyg)
    keys = sorted({k for r in pyg for k in r[field]})
    per_seed = {
        k: sum(r[field].get(k, 0.0) * r["seeds_counted"] for r in pyg) / max(seeds, 1) for k in keys
    }
    return {
        "seeds_counted": seeds,
        "edges_per_seed": per_seed,
        "edges_per_seed_total": sum(per_seed.values()),
    }


def _edges_entry(name: str, ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    diff = relative_differences(ours["edges_per_seed"], theirs["edges_per_seed"])
    return {
        "pyg": name,
        "seeds": theirs["seeds_counted"],
        "ours_seeds": ours.get("seeds_counted"),
        "ours": ours["edges_per_seed"],
        "theirs": theirs["edges_per_seed"],
        "relative_difference": diff,
        "max_relative_difference": max(diff.values(), default=0.0),
        "ours_total": ours["edges_per_seed_total"],
        "theirs_total": theirs["edges_per_seed_total"],
    }


def best_pyg(pyg: list[dict[str, Any]], precision: str, rate: str) -> dict[str, Any] | None:
    """The fastest best-effort PyG record by ``rate``, of ``precision`` where there is one."""
    best = [r for r in pyg if r["setup"] == "best"]
    same = [r for r in best if r["precision"] == precision] or best
    return max(same, key=lambda r: r[rate], default=None)


def runs_and_scaling(
    ours: dict[tuple[str, int, str], dict[str, Any]], pyg: list[dict[str, Any]], rate: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each configuration's medians beside the best PyG of its precision (compared by
    ``rate``), and the 1 -> N speed-up of each mode and precision."""
    runs = []
    for (mode, gpus, precision), m in sorted(ours.items()):
        ref = best_pyg(pyg, precision, rate)
        runs.append(
            {
                "mode": mode,
                "gpus": gpus,
                "precision": precision,
                **m,
                "pyg_best": None if ref is None else ref[rate],
                "pyg_best_config": None
                if ref is None
                else f"{ref['workers']} workers, {ref['precision']}",
                "times_pyg": None if ref is None else m["per_gpu"] / ref[rate],
            }
        )
    scaling = []
    for (mode, gpus, precision), m in sorted(ours.items()):
        one = ours.get((mode, 1, precision))
        if gpus > 1 and one is not None:
            speedup = m["total"] / one["total"]
            scaling.append({"mode": mode, "precision": precision, "gpus": gpus, "speedup": speedup})
    return runs, scaling


def compute(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the ratio table, and which targets are met (None: not measured)."""
    ours = _medians([r for r in rows if r.get("bench") == "dist_run"])
    pyg = [r for r in rows if r.get("bench") == "pyg_hetero_train"]
    runs, scaling = runs_and_scaling(ours, pyg, "seeds_per_s")
    our_edges = next((r for r in rows if r.get("bench") == "hetero_edges_per_seed"), None)
    edges = []
    paired = [r for r in pyg if "edges_per_seed_distgnn_same_seeds" in r]
    if pyg and paired:
        edges.append(
            _edges_entry(
                "all PyG configurations pooled; ours on the same seed batches",
                _pooled(paired, "edges_per_seed_distgnn_same_seeds"),
                _pooled(paired),
            )
        )
    if pyg and our_edges is not None:
        ours_all = {**our_edges, "seeds_counted": our_edges["seeds"]}
        edges.append(
            _edges_entry(
                "all PyG configurations pooled; ours over every training seed",
                ours_all,
                _pooled(pyg),
            )
        )
    for r in pyg:
        ours_r = (
            _pooled([r], "edges_per_seed_distgnn_same_seeds")
            if "edges_per_seed_distgnn_same_seeds" in r
            else our_edges
        )
        if ours_r is not None:
            name = f"{r['setup']}, {r['workers']} workers, {r['precision']}"
            edges.append(_edges_entry(name, ours_r, r))
    headline = next(
        (r for r in runs if (r["mode"], r["gpus"], r["precision"]) == ("worker", 1, "bf16")), None
    )
    worker_bf16 = [s for s in scaling if (s["mode"], s["precision"]) == ("worker", "bf16")]
    targets = {
        "speed": None
        if headline is None or headline["times_pyg"] is None
        else headline["times_pyg"] >= TYPED_SPEED_TARGET,
        "rate": None if headline is None else headline["per_gpu"] >= TYPED_RATE_TARGET,
        "scaling": None if not worker_bf16 else worker_bf16[0]["speedup"] >= TYPED_SCALING_TARGET,
        "edges_per_seed": None
        if not edges
        else edges[0]["max_relative_difference"] <= EDGES_TOLERANCE,
    }
    return {"runs": runs, "scaling": scaling, "edges": edges, "targets": targets}


def verdict(ok: bool | None) -> str:
    return {True: "met", False: "MISSED", None: "not measured"}[ok]


def render(result: dict[str, Any]) -> str:
    lines = ["run                 seeds/s/GPU median (min-max)   x best PyG   edges/seed  test acc"]
    for r in result["runs"]:
        name = f"{r['mode']}-{r['gpus']}-{r['precision']} ({r['runs']})"
        times = "-" if r["times_pyg"] is None else f"{r['times_pyg']:.1f}x"
        lines.append(
            f"{name:<20}{r['per_gpu']:>12,.0f} ({r['min']:,.0f}-{r['max']:,.0f})"
            f"{times:>13}{r['edges_per_seed']:>12.1f}{r['test_accuracy']:>10.3f}"
        )
    pyg = {r["pyg_best_config"]: r["pyg_best"] for r in result["runs"] if r["pyg_best"]}
    for config, rate in pyg.items():
        lines.append(f"best-effort PyG: {rate:,.0f} seeds/s ({config})")
    for s in result["scaling"]:
        lines.append(
            f"scaling {s['mode']} {s['precision']} 1 -> {s['gpus']} GPUs: {s['speedup']:.2f}x"
        )
    for i, e in enumerate(result["edges"]):
        worst = max(e["relative_difference"], key=lambda k: e["relative_difference"][k])
        lines.append(
            f"edges/seed vs PyG ({e['pyg']}, {e['seeds']:,} seeds): ours {e['ours_total']:.2f}, "
            f"PyG {e['theirs_total']:.2f}; largest difference {e['max_relative_difference']:.2%} "
            f"({worst})"
        )
        if i > 0:
            continue  # per edge type for the target's comparison only
        for key, d in e["relative_difference"].items():
            lines.append(
                f"    {key:<42}{e['ours'].get(key, 0.0):>9.2f}{e['theirs'].get(key, 0.0):>9.2f}"
                f"{d:>9.2%}"
            )
    within = f"edges per seed within {EDGES_TOLERANCE:.0%}"
    lines.append(
        targets_line(
            result["targets"],
            "",
            within,
            "edges_per_seed",
            speed_target=TYPED_SPEED_TARGET,
            scaling_target=TYPED_SCALING_TARGET,
        )
        + f"; >= {TYPED_RATE_TARGET:,.0f} seeds/s (worker, 1 GPU, bf16): "
        + verdict(result["targets"]["rate"])
    )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    return cli(argv, "ratios.py", compute, render)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
