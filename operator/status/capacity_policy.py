"""Capacity policy: a job whose resources cannot hold its capacity plan
(:mod:`distgnn_api.capacity`, the model ``distgnn plan`` prints) gets the condition
``CapacityFits=False`` with a Warning Event naming each role, resource and shortfall; with the
operator's policy ``fail`` it is Failed with that reason before its trainers start, rather
than OOM-killed an hour in. A job whose spec does not state its graph's size (an ``ogb`` or
``pyg`` dataset not named after a public OGB dataset) is not checked.
"""

from __future__ import annotations

from enum import StrEnum

from distgnn_api.capacity_check import Shortfall, spec_shortfalls
from distgnn_api.spec import DistGNNJobSpec

GPU_MEMORY_FIELD = "the operator's gpuMemoryGiB"


class CapacityPolicy(StrEnum):
    """What the operator does with a job whose resources cannot hold its plan."""

    warn = "warn"
    """Set CapacityFits=False and post a Warning Event; the job goes on."""
    fail = "fail"
    """As warn, and fail the job while it has not started training."""
    off = "off"
    """Do not check."""


def shortfalls(spec: DistGNNJobSpec, policy: CapacityPolicy, gpu_memory: int) -> list[Shortfall]:
    """The shortfalls the policy reports (none when it is off or the size is unknown)."""
    if policy is CapacityPolicy.off:
        return []
    return spec_shortfalls(spec, gpu_memory, GPU_MEMORY_FIELD) or []


def message(found: list[Shortfall]) -> str:
    """One message for every shortfall, each with its own way out."""
    return " | ".join(s.message for s in found) + " (distgnn plan shows the figures)"
