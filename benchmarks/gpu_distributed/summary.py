"""Across the repeats of each configuration: the median and spread of seeds/s per GPU, the
scaling from 1 GPU (medians of one call only), the ratio to PyG, and a table.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from records import emit


def summarise(args: argparse.Namespace, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: the median and spread of seeds/s per GPU over its repeats, and its
    hangs and failures; then the scaling from 1 GPU (medians of this call only)."""
    groups: dict[tuple[str, int, str, float, str], list[dict[str, Any]]] = {}
    for r in records:
        key = (r["mode"], r["gpus"], r["precision"], r["cache_ratio"], r.get("transport", "any"))
        groups.setdefault(key, []).append(r)
    summaries = []
    for (mode, gpus, precision, ratio, transport), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        per_gpu = [r["seeds_per_s_per_gpu"] for r in ok]
        summary: dict[str, Any] = {
            "bench": "dist_summary",
            "run": f"{mode}-{gpus}-{precision}" + ("-socket" if transport == "socket" else ""),
            "mode": mode,
            "gpus": gpus,
            "precision": precision,
            "cache_ratio": ratio,
            "transport": transport,
            "repeats": len(rs),
            "ok": len(ok),
            "hung": sum(r["status"] == "hung" for r in rs),
            "failed": sum(r["status"] == "failed" for r in rs),
        }
        if ok:
            summary.update(
                {
                    "seeds_per_s_per_gpu_median": round(statistics.median(per_gpu), 1),
                    "seeds_per_s_per_gpu_min": min(per_gpu),
                    "seeds_per_s_per_gpu_max": max(per_gpu),
                    "seeds_per_s_median": round(statistics.median(r["seeds_per_s"] for r in ok), 1),
                    "data_wait_share_median": statistics.median(r["data_wait_share"] for r in ok),
                    "host_wait_share_median": statistics.median(r["host_wait_share"] for r in ok),
                    "feature_bytes_per_step_median": statistics.median(
                        r.get("feature_bytes_per_step", 0) for r in ok
                    ),
                }
            )
            # link-prediction runs report the test MRR where node runs report accuracy; the
            # spread shows whether runs that should agree (partitioned and replicated, 1 and
            # N GPUs) do
            figure = "test_mrr" if "test_mrr" in ok[0] else "test_accuracy"
            values = [r[figure] for r in ok if r.get(figure) is not None]
            if values:
                summary.update(
                    {
                        f"{figure}_median": statistics.median(values),
                        f"{figure}_min": min(values),
                        f"{figure}_max": max(values),
                    }
                )
        emit(args.out, summary)
        summaries.append(summary)
    by_key = {
        (s["mode"], s["gpus"], s["precision"], s["cache_ratio"]): s
        for s in summaries
        if "seeds_per_s_median" in s and s["transport"] == "any"
    }
    for (mode, gpus, precision, ratio), many in by_key.items():
        one = by_key.get((mode, 1, precision, ratio))
        if gpus > 1 and one is not None:
            emit(
                args.out,
                {
                    "bench": "dist_scaling",
                    "mode": mode,
                    "precision": precision,
                    "cache_ratio": ratio,
                    "gpus": gpus,
                    "seeds_per_s_1gpu_median": one["seeds_per_s_median"],
                    "seeds_per_s_median": many["seeds_per_s_median"],
                    "speedup": round(many["seeds_per_s_median"] / one["seeds_per_s_median"], 3),
                },
            )
    return summaries


def table(summaries: list[dict[str, Any]]) -> None:
    """A human-readable summary: median [min-max] seeds/s per GPU of each configuration, and
    the median [min-max] test accuracy (MRR for link prediction)."""
    print(
        f"{'run':<25}{'cache':>6}{'ok/runs':>9}{'hung':>6}{'seeds/s/GPU median':>20}"
        f"{'min-max':>22}{'data wait':>11}{'host wait':>11}{'acc/MRR':>10}{'min-max':>14}"
        f"{'MB/step':>9}"
    )
    for s in summaries:
        line = f"{s['run']:<25}{s['cache_ratio']:>6g}{s['ok']:>5}/{s['repeats']:<3}{s['hung']:>6}"
        if "seeds_per_s_per_gpu_median" in s:
            spread = f"{s['seeds_per_s_per_gpu_min']:,.0f}-{s['seeds_per_s_per_gpu_max']:,.0f}"
            figure = "test_mrr" if "test_mrr_median" in s else "test_accuracy"
            if f"{figure}_median" in s:
                quality = f"{s[f'{figure}_median']:>10.3f}"
                quality += f"{s[f'{figure}_min']:.3f}-{s[f'{figure}_max']:.3f}".rjust(14)
            else:
                quality = f"{'-':>10}{'-':>14}"
            line += (
                f"{s['seeds_per_s_per_gpu_median']:>20,.0f}{spread:>22}"
                f"{s['data_wait_share_median']:>11.1%}{s['host_wait_share_median']:>11.1%}"
                f"{quality}{s['feature_bytes_per_step_median'] / 1e6:>9.2f}"
            )
        print(line)


def compare(args: argparse.Namespace, summaries: list[dict[str, Any]], base: float) -> None:
    """Each configuration's median seeds/s per GPU over the PyG baseline's (same call)."""
    for s in summaries:
        if "seeds_per_s_per_gpu_median" not in s:
            continue
        emit(
            args.out,
            {
                "bench": "dist_vs_pyg",
                "run": s["run"],
                "cache_ratio": s["cache_ratio"],
                "seeds_per_s_per_gpu_median": s["seeds_per_s_per_gpu_median"],
                "pyg_seeds_per_s": round(base, 1),
                "times_pyg_per_gpu": round(s["seeds_per_s_per_gpu_median"] / base, 2),
            },
        )
