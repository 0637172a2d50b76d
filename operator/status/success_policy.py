"""Success policy: the job Succeeded when every trainer rank's containers have exited 0, either
in their current state or in their last state (the kubelet restarts StatefulSet containers, and a
restarted trainer that finds result.json exits 0 at once)."""

from __future__ import annotations

from distgnn_api.contract import Role
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.status.observed import Observed


def trainers_succeeded(spec: DistGNNJobSpec, observed: Observed, generation: int) -> bool:
    """True when each rank 0..replicas-1 has a current-generation pod that exited 0."""
    done = {p.rank for p in observed.current_pods(Role.trainer, generation) if p.exited_ok()}
    return done >= set(range(spec.trainers.replicas))
