"""Size policy: a job whose graph's size, known from its spec (synthetic generators, public
OGB datasets), breaks a rule of the partition step or the trainers is Failed before its
partition Job is created, with a condition that names the field (:mod:`distgnn_api.size_rules`)
instead of failing inside a pod after the partition step has spent its time."""

from __future__ import annotations

from distgnn_api.size_rules import size_errors
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.constants import GRAPH_TOO_SMALL


def failure(spec: DistGNNJobSpec) -> tuple[str, str] | None:
    """The Failed condition's reason and message, or None when the job can run."""
    found = size_errors(spec)
    if not found:
        return None
    return GRAPH_TOO_SMALL.format(errors="; ".join(str(e) for e in found))
