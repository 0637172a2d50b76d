"""A link-prediction benchmark run: its job spec (``syntheticLink``, GraphSAGE, a decoder) and
its figures; its processes are planned by ``run_config`` of ``benchmarks/gpu_distributed``, as
``distgnn run`` plans them.

Runs are named as in ``benchmarks/gpu_distributed`` (``mode-gpus-precision``, parsed by its
``run_config.parse_run``); one partition per GPU.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from job_run import STATS_FILE
from run_config import RunConfig, role_sections, run_training
from spec_sections import model_section

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec, parse_spec

EVAL_LINE = re.compile(r"ranking evaluation in ([0-9.]+) s")


def job_spec(
    cfg: RunConfig, args: argparse.Namespace, cuda: bool, partitions: int
) -> DistGNNJobSpec:
    """The run's ``DistGNNJob`` spec: the citation2-shaped graph, random partitions; with
    ``--positives-per-gpu``, each epoch a fresh subset of that many positives per GPU."""
    return parse_spec(
        {
            "task": "linkPrediction",
            "linkPrediction": {
                "negatives": {"perPositive": args.negatives, "kind": "uniform"},
                "evaluation": {
                    "negatives": args.eval_negatives,
                    "hitsAt": [k for k in (10, 50, 100) if k <= args.eval_negatives],
                    "maxPositives": args.eval_positives,
                },
                "decoder": args.decoder,
                **(
                    {"positivesPerEpoch": args.positives_per_gpu * cfg.gpus}
                    if args.positives_per_gpu
                    else {}
                ),
            },
            "dataset": {"syntheticLink": {"scale": args.scale, "seed": args.graph_seed}},
            "partition": {"algorithm": "random", "numPartitions": partitions},
            **role_sections(cfg, args, cuda),
            "model": model_section("sage", args, dropout=0.0),
            "training": run_training(cfg, args, learning_rate=0.001, evalEvery=0),
        }
    )


def link_figures(run_dir: Path, gpus: int, seeds_per_positive: int) -> dict[str, Any]:
    """A finished run's figures: positive edges/s (seed rows / rows per positive), the
    ranking figures and how long the final ranking evaluation took (trainer 0's log)."""
    epochs = json.loads((run_dir / STATS_FILE).read_text())["epochs"]
    measured = epochs[1:] if len(epochs) > 1 else epochs
    seconds = sum(e["seconds"] for e in measured)
    seeds = sum(e["seeds"] for e in measured)
    result = json.loads((run_dir / c.RESULT_FILE).read_text())
    test = result.get("testLink") or {}
    log = (run_dir / c.LOG_DIR / "trainer-0.log").read_text(errors="replace")
    evals = [float(m) for m in EVAL_LINE.findall(log)]
    return {
        "epochs_measured": len(measured),
        "epoch_s": round(seconds / len(measured), 3),
        "seeds_per_s": round(seeds / seconds, 1),
        "seeds_per_s_per_gpu": round(seeds / seconds / gpus, 1),
        "positives_per_s_per_gpu": round(seeds / seconds / gpus / seeds_per_positive, 1),
        "sampled_edges_per_seed": round(sum(e["edges"] for e in measured) / max(seeds, 1), 3),
        "data_wait_share": round(sum(e["data_wait_seconds"] for e in measured) / seconds, 4),
        "host_wait_share": round(sum(e["host_wait_seconds"] for e in measured) / seconds, 4),
        "warmup_epoch_s": round(epochs[0]["seconds"], 3) if len(epochs) > 1 else None,
        "final_loss": round(epochs[-1]["loss"], 4),
        "test_mrr": test.get("mrr"),
        "test_hits": test.get("hits"),
        "test_positives": test.get("positives"),
        "final_ranking_eval_s": evals[-1] if evals else None,
    }
