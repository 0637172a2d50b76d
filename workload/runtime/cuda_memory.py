"""GPU memory of one process at the boundaries of its phases (setup, first steps, training,
evaluation; a sampler's setup and shutdown), from the caching allocator's counters and the
card's free memory.

Each record holds what the allocator allocated and reserved (now and at its peak within the
phase), its active peak and its allocation retries (cumulative: each one freed the cache to
retry an allocation that did not fit), and the card's free and total memory. ``nvidia-smi``'s
figure for the process minus the reserved peak is memory outside the allocator: the CUDA
context, NCCL's buffers, the RPC agent's. Snapshots are taken only between phases, never
per step (the caller compares a step index with :attr:`CudaMemoryPhases.first_steps`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass

import torch

from distgnn_workload.runtime.ddp import Collectives

TRAINER_PHASES = ("setup", "first_steps", "training", "evaluation")
"""A trainer's phases: model, features and caches on the device; the first steps (with any
CUDA graph capture); the rest of training (prefetch included); the final evaluation."""
STATS_KEY = "cuda_memory"
"""The key of the trainers' records in the stats file (``training_stats.json``):
``{rank: {phase: record}}``, present on CUDA only."""
LOG_PREFIX = "cuda memory: "
"""A process with no stats file logs each record as one line: this prefix, then JSON
(``{"phase": ..., **record}``)."""
OVERALL = "overall"
"""The key of the peaks over every phase, next to the phases' own records."""


@dataclass(frozen=True)
class CudaMemory:
    """The allocator's counters and the card's memory at one moment, in bytes."""

    allocated: int
    allocated_peak: int
    reserved: int
    reserved_peak: int
    active_peak: int
    alloc_retries: int
    """Times the allocator freed its cache to retry an allocation (since the start)."""
    card_free: int
    card_total: int


FIELDS = tuple(CudaMemory.__dataclass_fields__)


def snapshot(device: torch.device) -> CudaMemory | None:
    """The allocator's counters on ``device`` and the card's free/total; None off CUDA."""
    if device.type != "cuda":
        return None
    stats = torch.cuda.memory_stats(device)
    free, total = torch.cuda.mem_get_info(device)
    return CudaMemory(
        allocated=int(stats.get("allocated_bytes.all.current", 0)),
        allocated_peak=int(stats.get("allocated_bytes.all.peak", 0)),
        reserved=int(stats.get("reserved_bytes.all.current", 0)),
        reserved_peak=int(stats.get("reserved_bytes.all.peak", 0)),
        active_peak=int(stats.get("active_bytes.all.peak", 0)),
        alloc_retries=int(stats.get("num_alloc_retries", 0)),
        card_free=int(free),
        card_total=int(total),
    )


class CudaMemoryPhases:
    """The records of one process's phases, in order; each phase's peaks are its own (the
    peak counters are reset after each record) and :meth:`as_dict` adds the overall ones.

    Off CUDA every call returns at once and :meth:`as_dict` returns None.
    """

    def __init__(self, device: torch.device, *, first_steps: int = 1) -> None:
        self.device = device
        self.first_steps = first_steps
        """The training step after which the first-steps record is taken (a CUDA graph
        captured after warm-up is inside it)."""
        self.records: dict[str, CudaMemory] = {}

    @property
    def enabled(self) -> bool:
        return self.device.type == "cuda"

    def mark(self, phase: str) -> CudaMemory | None:
        """Record ``phase`` (since the previous mark, or since the start) and start the next."""
        record = snapshot(self.device)
        if record is None:
            return None
        self.records[phase] = record
        torch.cuda.reset_peak_memory_stats(self.device)
        return record

    def as_dict(self) -> dict[str, dict[str, int]] | None:
        """``{phase: record, "overall": peaks over all phases}``; None off CUDA."""
        if not self.enabled:
            return None
        out = {phase: asdict(r) for phase, r in self.records.items()}
        if self.records:
            out[OVERALL] = overall(list(self.records.values()))
        return out


def overall(records: list[CudaMemory]) -> dict[str, int]:
    """The peaks over ``records`` (each phase's peak since the previous one was reset) and
    the last one's cumulative and current figures."""
    last = asdict(records[-1])
    for name in ("allocated_peak", "reserved_peak", "active_peak"):
        last[name] = max(getattr(r, name) for r in records)
    last["card_free"] = min(r.card_free for r in records)
    return last


def gather(
    phases: CudaMemoryPhases, collectives: Collectives, names: tuple[str, ...] = TRAINER_PHASES
) -> dict[str, dict[str, dict[str, int]]] | None:
    """Every trainer's records of ``names`` by rank (``{"0": {phase: record}}``), over the
    host-side control group: a collective, called by every trainer; None off CUDA."""
    if not phases.enabled:
        return None
    missing = [-1] * len(FIELDS)
    rows = [
        [getattr(phases.records[n], f) for f in FIELDS] if n in phases.records else missing
        for n in names
    ]
    out: dict[str, dict[str, dict[str, int]]] = {}
    for rank, packed in enumerate(collectives.all_gather(torch.tensor(rows, dtype=torch.int64))):
        records = [
            (n, CudaMemory(*(int(v) for v in row)))
            for n, row in zip(names, packed.tolist(), strict=True)
            if row != missing
        ]
        got = {n: asdict(r) for n, r in records}
        if records:
            got[OVERALL] = overall([r for _, r in records])
        out[str(rank)] = got
    return out


def log_record(logger: logging.Logger, phases: CudaMemoryPhases, phase: str) -> None:
    """Record ``phase`` and log it as one ``LOG_PREFIX`` JSON line (nothing off CUDA)."""
    record = phases.mark(phase)
    if record is not None:
        logger.info("%s%s", LOG_PREFIX, json.dumps({"phase": phase, **asdict(record)}))
