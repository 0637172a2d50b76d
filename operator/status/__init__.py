"""Status of a DistGNNJob, computed purely from its spec and observed children, with one module
per policy (failure, success, suspend, active deadline, TTL after finished, clean pods)."""

from distgnn_operator.status.compute import compute_status
from distgnn_operator.status.observed import (
    ContainerExit,
    Observed,
    PartitionJobView,
    PodView,
    StatefulSetView,
)

__all__ = [
    "ContainerExit",
    "Observed",
    "PartitionJobView",
    "PodView",
    "StatefulSetView",
    "compute_status",
]
