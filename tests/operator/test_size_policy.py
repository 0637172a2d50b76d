"""The size policy: a job whose graph, sized by its spec, cannot hold it fails before its
partition Job, naming the field; a graph the spec does not size is left to the workload."""

from __future__ import annotations

from distgnn_api.size_rules import size_errors
from distgnn_api.spec import Phase
from distgnn_operator.status import Observed, compute_status
from distgnn_operator.status.conditions import find
from tests.operator.factories import T0, condition, make_spec


def test_more_partitions_than_nodes_fails_before_the_partition_job() -> None:
    spec = make_spec(
        dataset={"synthetic": {"numNodes": 8, "numEdges": 20}},
        samplers={"replicas": 4},
        partition={"numPartitions": 16},
    )
    status = compute_status(spec, Observed(partition_job_name="demo-partition"), None, T0)
    assert status.phase is Phase.failed
    failed = condition(status, "Failed")
    assert failed.reason == "SpecDoesNotFitGraph"
    assert failed.message.startswith(
        "spec.partition.numPartitions: 16 partitions exceed the graph's 8 nodes"
    )
    assert "lower partition.numPartitions to at most 8" in failed.message
    assert find(status.conditions, "Partitioned") is None


def test_the_default_partition_count_names_the_replicas_it_follows() -> None:
    server = make_spec(
        dataset={"synthetic": {"numNodes": 3, "numEdges": 3}}, samplers={"replicas": 4}
    )
    worker = make_spec(
        dataset={"synthetic": {"numNodes": 3, "numEdges": 3}},
        samplers={"replicas": 0},
        trainers={"replicas": 4},
    )
    assert [e.field for e in size_errors(server)] == ["spec.samplers.replicas"]
    assert [e.field for e in size_errors(worker)] == ["spec.trainers.replicas"]


def test_all_negatives_on_a_public_ogb_link_dataset_of_known_size_fails() -> None:
    spec = make_spec(
        dataset={"ogb": {"path": "datasets/ogbl-citation2"}},
        task="linkPrediction",
        linkPrediction={"evaluation": {"negatives": "all", "hitsAt": [10]}},
    )
    (error,) = size_errors(spec)
    assert error.field == "spec.linkPrediction.evaluation.negatives"
    assert "2,927,963" in error.message
    status = compute_status(spec, Observed(), None, T0)
    assert status.phase is Phase.failed
    failed = condition(status, "Failed")
    assert "spec.linkPrediction.evaluation.negatives" in failed.message


def test_a_dataset_of_unknown_size_and_a_graph_large_enough_pass() -> None:
    unknown = make_spec(
        dataset={"ogb": {"path": "datasets/my-graph"}},
        samplers={"replicas": 64},
    )
    assert size_errors(unknown) == []
    fits = make_spec(
        dataset={"synthetic": {"numNodes": 8, "numEdges": 20}}, samplers={"replicas": 8}
    )
    assert size_errors(fits) == []
    status = compute_status(fits, Observed(partition_job_name="demo-partition"), None, T0)
    assert status.phase is Phase.pending
