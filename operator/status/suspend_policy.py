"""Suspend policy: runPolicy.suspend removes the job's pods (StatefulSets at 0, the partition Job
suspended) and stops the active-deadline clock; resuming continues from the last checkpoint.
This is what makes a DistGNNJob admissible by Kueue."""

from __future__ import annotations

from distgnn_api.spec import DistGNNJobSpec


def is_suspended(spec: DistGNNJobSpec) -> bool:
    """The spec asks for suspension."""
    return spec.run_policy.suspend
