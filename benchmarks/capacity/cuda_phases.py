"""Where a GPU run's memory went: each process's allocator records by phase, beside what
``nvidia-smi`` saw it hold.

The trainers write theirs into the run's ``training_stats.json`` (``cuda_memory``, by rank:
setup, first steps with the CUDA graph capture, training, evaluation, overall) and the GPU
samplers log theirs (setup, shutdown) as ``cuda memory: {json}`` lines
(``distgnn_workload.runtime.cuda_memory``). :func:`collect` gathers them by process
(``trainer-0``, ``sampler-0``) into a calibration record's ``cuda_memory``;
:func:`phase_lines` prints them. A process's ``nvidia-smi`` peak minus its allocator's
reserved peak is memory outside the allocator: the CUDA context, NCCL, the RPC agent's
buffers.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from distgnn_workload.runtime.cuda_memory import (
    LOG_PREFIX,
    OVERALL,
    STATS_KEY,
    CudaMemory,
    overall,
)
from distgnn_workload.trainer.process import STATS_FILE

GIB = 2**30
COLUMNS = (
    ("allocated", "alloc"),
    ("allocated_peak", "alloc peak"),
    ("reserved", "reserved"),
    ("reserved_peak", "resv peak"),
    ("active_peak", "active peak"),
)
"""The figures of a phase printed in GiB, with their column titles."""


def collect(run_dir: Path) -> dict[str, dict[str, dict[str, int]]]:
    """Every process's records by phase, ``{"trainer-0": {phase: record}}``: the trainers'
    from the stats file, the samplers' from their logs; empty off CUDA or before the end."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    stats = run_dir / STATS_FILE
    if stats.exists():
        for rank, phases in (json.loads(stats.read_text()).get(STATS_KEY) or {}).items():
            out[f"trainer-{rank}"] = phases
    for log in sorted((run_dir / "logs").glob("sampler-*.log")):
        phases = sampler_records(log.read_text(errors="replace"))
        if phases:
            out[log.stem] = phases
    return out


def sampler_records(log: str) -> dict[str, dict[str, int]]:
    """The ``cuda memory:`` records of one process's log by phase, and their overall peaks."""
    records: dict[str, CudaMemory] = {}
    for line in log.splitlines():
        _, found, raw = line.partition(LOG_PREFIX)
        if found:
            fields = json.loads(raw)
            phase = fields.pop("phase")
            records[phase] = CudaMemory(**fields)
    out = {phase: asdict(r) for phase, r in records.items()}
    if records:
        out[OVERALL] = overall(list(records.values()))
    return out


def outside_allocator(r: dict[str, Any]) -> dict[str, dict[str, int]]:
    """By process: its ``nvidia-smi`` peak, its allocator's reserved peak, and the difference
    (memory outside the allocator). With one GPU and no per-process figure (a container's
    process ids are not those nvidia-smi reports), the card's peak against the sum of all."""
    records = r.get("cuda_memory") or {}
    out: dict[str, dict[str, int]] = {}
    for key, phases in records.items():
        smi = r.get("peak_gpu_bytes", {}).get(key)
        if smi and OVERALL in phases:
            reserved = phases[OVERALL]["reserved_peak"]
            out[key] = {"nvidia_smi": smi, "reserved_peak": reserved, "outside": smi - reserved}
    card = r.get("peak_card_bytes", {}).get("card-0")
    if not out and card and r.get("gpus") == 1 and records:
        reserved = sum(p[OVERALL]["reserved_peak"] for p in records.values() if OVERALL in p)
        out["card-0 (all processes)"] = {
            "nvidia_smi": card, "reserved_peak": reserved, "outside": card - reserved}  # fmt: skip
    return out


def phase_lines(r: dict[str, Any]) -> list[str]:
    """A table per process of its records by phase (GiB), then its memory outside the
    allocator; nothing for a record without ``cuda_memory`` (CPU, or recorded before)."""
    records = r.get("cuda_memory") or {}
    if not records:
        return []
    mode = r["mode"]
    titles = "".join(f"{title:>12}" for _, title in COLUMNS)
    lines = []
    for key, phases in records.items():
        lines.append(f"{mode:7} {key} GPU memory by phase (GiB)")
        lines.append(f"{mode:7}   {'phase':12}{titles}{'retries':>9}{'card used':>11}")
        for phase, rec in phases.items():
            figures = "".join(f"{rec[name] / GIB:>12.2f}" for name, _ in COLUMNS)
            used = (rec["card_total"] - rec["card_free"]) / GIB
            lines.append(f"{mode:7}   {phase:12}{figures}{rec['alloc_retries']:>9}{used:>11.2f}")
    for key, v in outside_allocator(r).items():
        lines.append(
            f"{mode:7} {key}: nvidia-smi {v['nvidia_smi'] / GIB:.2f} GiB - allocator reserved "
            f"peak {v['reserved_peak'] / GIB:.2f} GiB = {v['outside'] / GIB:.2f} GiB outside "
            "the allocator (CUDA context, NCCL, RPC buffers)"
        )
    return lines
