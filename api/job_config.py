"""The job config every pod reads (``job.json``), and the content key of the job's partition."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from distgnn_api.graph_size_sources import from_spec
from distgnn_api.link import LINK_SPLIT_VERSION, SYNTHETIC_LINK_GENERATOR
from distgnn_api.partition_cost import out_of_core
from distgnn_api.spec import DistGNNJobSpec, Model

# The on-disk partition format; part of the content key, so a format change re-partitions.
PARTITION_FORMAT_VERSION = 1


def partition_key(spec: DistGNNJobSpec) -> str:
    """Content key of a job's partition: a hash of what determines the partition's bytes."""
    dataset = spec.dataset.model_dump(mode="json", by_alias=True, exclude_none=True)
    hetero = spec.dataset.hetero_section
    if hetero is not None:
        # As it applies: a syntheticMag with or without its default hetero section is one graph.
        dataset["hetero"] = hetero.model_dump(mode="json", by_alias=True, exclude_none=True)
    payload = {
        "format": PARTITION_FORMAT_VERSION,
        "dataset": dataset,
        "algorithm": spec.partition.algorithm.value,
        "numPartitions": spec.num_partitions,
        "balanceTrainNodes": spec.partition.balance_train_nodes,
        "balanceEdges": spec.partition.balance_edges,
        "seed": spec.partition.seed,
    }
    if spec.dataset.synthetic is not None and out_of_core(spec, from_spec(spec))[0]:
        # The streamed generator draws another graph of the same family (about numEdges
        # edges); stores of other datasets are the same on either path.
        payload["streamedSynthetic"] = True
    if spec.partition.metis_sample_edges:
        # Out of core, METIS on a sample instead of the random assignment (and its size).
        payload["metisSampleEdges"] = spec.partition.metis_sample_edges
    if spec.dataset.synthetic_link is not None:
        payload["syntheticLinkGenerator"] = SYNTHETIC_LINK_GENERATOR
    link = spec.link_prediction
    if link is not None:
        # The store holds the edge split and the fixed evaluation negatives: what draws them
        # is part of the content. A node-classification job's key is as it always was.
        payload["linkPrediction"] = {
            "edgeType": link.edge_type,
            "split": link.split.model_dump(mode="json", by_alias=True, exclude_none=True),
            "validFraction": link.split.valid_fraction,
            "testFraction": link.split.test_fraction,
            "excludeReverse": link.exclude_reverse,
            "reverseEdgeType": link.reverse_edge_type,
            "evaluationNegatives": link.evaluation.negatives,
            "maxPositives": link.evaluation.max_positives,
            "draw": LINK_SPLIT_VERSION,
        }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class JobConfig(Model):
    """The job config JSON mounted into every pod (ConfigMap key ``job.json``).

    The fields of heterogeneous graphs (``dataset.syntheticMag``, ``dataset.hetero``,
    ``model.edgeFanouts``, ``model.embeddingDim``) are written only when set, so a homogeneous
    job's config is unchanged by them. The workload reads them through ``spec``:
    ``spec.dataset.hetero_section`` is the typed side as it applies, and
    :mod:`distgnn_api.hetero` resolves the target type and the fanout of every edge type
    against the graph it loads.
    """

    name: str
    """metadata.name of the job."""
    namespace: str
    """metadata.namespace of the job."""
    uid: str
    """metadata.uid of the job."""
    partition_key: str
    """Content key of the partition."""
    spec: DistGNNJobSpec
    """The job spec, defaults filled in."""


def job_config_json(name: str, namespace: str, uid: str, spec: DistGNNJobSpec) -> str:
    """Serialise the job config that the workload reads from ENV_CONFIG."""
    cfg = JobConfig(
        name=name, namespace=namespace, uid=uid, partition_key=partition_key(spec), spec=spec
    )
    return cfg.model_dump_json(by_alias=True, indent=2)


def load_job_config(path: str | Path) -> JobConfig:
    """Read the job config a pod was given."""
    return JobConfig.model_validate_json(Path(path).read_text())
