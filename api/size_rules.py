"""Rules of a job that need its graph's size, for the datasets whose size the spec tells.

Admission cannot read a dataset, so the CRD cannot check these; the partition step and the
trainers would refuse the job only after the partition Job has run. For the synthetic
generators and the public OGB datasets named by their directory
(:func:`distgnn_api.graph_size_sources.from_spec`) the size is known from the spec alone:
the operator fails such a job before it creates the partition Job, and ``distgnn
validate`` and ``distgnn run`` refuse it, each naming the field. Other datasets are checked by the workload
when it loads them (the same rules: ``check_num_partitions``, ``check_all_negatives``).
"""

from __future__ import annotations

from dataclasses import dataclass

from distgnn_api.graph_size import GraphSize
from distgnn_api.graph_size_sources import from_spec
from distgnn_api.link import check_all_negatives
from distgnn_api.spec import DistGNNJobSpec

NEGATIVES_FIELD = "spec.linkPrediction.evaluation.negatives"


@dataclass(frozen=True)
class SizeError:
    """A rule the job breaks for its graph's size: the field to change and how."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _partitions(spec: DistGNNJobSpec, graph: GraphSize) -> SizeError | None:
    """Every partition needs at least one node (partition/algorithms.py check_num_partitions)."""
    k = spec.num_partitions
    if k <= graph.num_nodes:
        return None
    if spec.partition.num_partitions is not None:
        field = "spec.partition.numPartitions"
    else:
        field = "spec.trainers.replicas" if spec.worker_mode else "spec.samplers.replicas"
    return SizeError(
        field,
        f"{k} partitions exceed the graph's {graph.num_nodes:,} nodes ({graph.source}): every "
        f"partition needs at least one node; lower {field.removeprefix('spec.')} to at most "
        f"{graph.num_nodes:,}",
    )


def _all_negatives(spec: DistGNNJobSpec, graph: GraphSize) -> SizeError | None:
    """'all' negatives rank against every node: small graphs only (link.check_all_negatives).
    A heterogeneous graph ranks against one node type: the workload checks it."""
    lp = spec.link_prediction
    if lp is None or not lp.evaluation.all_negatives or spec.dataset.hetero_section is not None:
        return None
    try:
        check_all_negatives(graph.num_nodes, NEGATIVES_FIELD)
    except ValueError as err:
        return SizeError(NEGATIVES_FIELD, str(err).removeprefix(f"{NEGATIVES_FIELD}: "))
    return None


def size_errors(spec: DistGNNJobSpec) -> list[SizeError]:
    """The size rules the job breaks; none when the spec does not tell the graph's size."""
    graph = from_spec(spec)
    if graph is None:
        return []
    found = (_partitions(spec, graph), _all_negatives(spec, graph))
    return [e for e in found if e is not None]
