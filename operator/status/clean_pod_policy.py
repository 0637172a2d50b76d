"""Clean-pod policy: which pods stop when the job finishes.

All scales both StatefulSets to 0. Running stops the pods still running: the samplers (which
never exit on their own) and, after a failure, the trainers; trainers that exited 0 are kept.
None keeps every pod for debugging.
"""

from __future__ import annotations

from distgnn_api.contract import Role
from distgnn_api.spec import CleanPodPolicy, DistGNNJobSpec, Phase


def replicas_after_finish(spec: DistGNNJobSpec, role: Role, phase: Phase) -> int:
    """Replicas of a role's StatefulSet once the job is Succeeded or Failed."""
    policy = spec.run_policy.clean_pod_policy
    keep = spec.samplers.replicas if role is Role.sampler else spec.trainers.replicas
    if policy is CleanPodPolicy.all:
        return 0
    if policy is CleanPodPolicy.running:
        return keep if role is Role.trainer and phase is Phase.succeeded else 0
    return keep


def stops_partition_job(spec: DistGNNJobSpec) -> bool:
    """Whether an unfinished partition Job is suspended when the job finishes."""
    return spec.run_policy.clean_pod_policy is not CleanPodPolicy.none
