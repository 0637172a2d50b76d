"""Print a short table of the JSON lines that ``pipeline_bench.py`` and ``pyg_baseline.py`` wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(path: str) -> int:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    for r in rows:
        kind = r.get("bench")
        tag = f"{kind:<10} {r.get('precision', r.get('sampler', ''))!s:<7}"
        if kind in ("env", "pyg_env"):
            print(tag, r.get("device"), r.get("torch"))
        elif kind == "graph":
            print(tag, f"nodes={r['nodes']} edges={r['directed_edges']} gen={r['seconds']:.1f}s")
        elif kind == "breakdown":
            gpu = r.get("gpu_ms", r["host_ms"])
            print(
                tag,
                " ".join(f"{k}={v:.2f}" for k, v in gpu.items()),
                f"total={sum(gpu.values()):.2f}ms",
            )
        elif kind == "pyg_skipped":
            print(tag, f"skipped ({r['reason']}): workers={r.get('workers')} trim={r.get('trim')}")
        elif kind == "memory":
            print(tag, f"max_allocated={r['max_allocated_gb']:.1f} GiB")
        elif "seeds_per_s" in r:
            extra = []
            for key in ("sampler", "aggregation", "prefetch", "setup", "workers", "trim"):
                if key in r:
                    extra.append(f"{key}={r[key]}")
            if "seeds_per_s_min" in r:
                extra.append(
                    f"min-max={r['seeds_per_s_min']:.0f}-{r['seeds_per_s_max']:.0f}"
                    f" ({r['repeats']} runs)"
                )
            if "data_wait_share" in r:
                extra.append(f"wait={100 * r['data_wait_share']:.1f}%")
            if "gpu_data_wait_share" in r:
                extra.append(f"gpu_wait={100 * r['gpu_data_wait_share']:.1f}%")
            if "sampled_edges_per_s" in r:
                extra.append(f"edges/s={r['sampled_edges_per_s'] / 1e6:.1f}M")
            print(tag, f"seeds/s={r['seeds_per_s']:>9.0f} ms/batch={r['ms_per_batch']:.2f}", *extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
