"""The partition Job's out-of-core path: stream the dataset, assign its nodes, write the
store through the external bucket sort (:mod:`.ooc_writer`).

Taken when ``partition.outOfCore`` is ``always``, or ``auto`` and the capacity model
(``distgnn_api.partition_cost.out_of_core``) says the in-memory partitioner would exceed the
partition container's memory. METIS needs the whole graph in memory: with
``partition.metisSampleEdges`` set, a METIS spec runs METIS on a sampled subgraph and streams
the other nodes to their neighbours' partitions (:mod:`.ooc_metis`; META.json records
``metis`` and how under ``out_of_core_assignment``); without it, nodes are assigned at random
(with the spec's seed) and META.json records ``random``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import JobConfig, WorkloadEnv
from distgnn_api.graph_size import GraphSize
from distgnn_api.graph_size_sources import from_spec
from distgnn_api.spec import DatasetSpec, DistGNNJobSpec, PartitionAlgorithm
from distgnn_workload.data.csv_files import find_csv, iter_csv
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.ogb import RAW_DIR, _single_count
from distgnn_workload.data.stream import StreamedGraph
from distgnn_workload.partition import algorithms, stages
from distgnn_workload.partition.ooc_metis import sampled_metis_assignment
from distgnn_workload.partition.ooc_writer import write_streamed
from distgnn_workload.partition.store import PartitionStore

log = logging.getLogger(__name__)


def graph_size(spec: DistGNNJobSpec, data_dir: Path) -> GraphSize | None:
    """The graph's size as the spec states it, or as an OGB dataset's raw files declare it
    (num-node-list, num-edge-list and the width of node-feat's first row); None when
    neither tells."""
    found = from_spec(spec)
    if found is not None or spec.dataset.ogb is None:
        return found
    raw = data_dir / spec.dataset.ogb.path / RAW_DIR
    try:
        nodes = _single_count(raw, "num-node-list")
        edges = _single_count(raw, "num-edge-list")
        feat = find_csv(raw, "node-feat")
        first = next(iter_csv(feat, np.float32, None, 1), None) if feat else None
    except DatasetError as err:
        log.info("cannot size the dataset before loading it: %s", err)
        return None
    if nodes is None or edges is None or first is None:
        return None
    return GraphSize(
        num_nodes=nodes,
        num_edges=2 * edges,
        num_features=int(first.shape[1]),
        num_classes=2,
        num_train_nodes=nodes,
        source=f"{raw}'s declared counts",
    )


def open_stream(spec: DatasetSpec, data_dir: Path) -> StreamedGraph:
    """The job's dataset as a streamed graph (homogeneous synthetic or ogb)."""
    if spec.synthetic is not None:
        from distgnn_workload.data.synthetic_stream import stream_synthetic

        return stream_synthetic(spec.synthetic)
    if spec.ogb is not None and spec.hetero is None:
        from distgnn_workload.data.ogb_stream import stream_ogb

        return stream_ogb(data_dir / spec.ogb.path, spec.ogb.split_scheme)
    raise DatasetError(
        "the out-of-core partitioner streams a homogeneous synthetic or ogb dataset; set "
        "partition.outOfCore to never (or auto) for this one",
        source="spec.partition.outOfCore",
    )


def partition_streamed(
    env: WorkloadEnv, config: JobConfig, out: TextIO
) -> tuple[PartitionStore, dict[str, float]]:
    """Partition the job's dataset out of core into ``env.partition_dir``; returns the store
    and the seconds of each step."""
    spec = config.spec
    k = spec.num_partitions
    part_spec = spec.partition
    sampled = part_spec.algorithm == PartitionAlgorithm.metis and part_spec.metis_sample_edges > 0
    if part_spec.algorithm != PartitionAlgorithm.random and not sampled:
        log.warning(
            "out of core: METIS needs the whole graph in memory; assigning nodes at random "
            "(seed %d) instead (set partition.metisSampleEdges for METIS on a sampled subgraph)",
            part_spec.seed,
        )
        part_spec = part_spec.model_copy(update={"algorithm": PartitionAlgorithm.random})
    synthetic = spec.dataset.synthetic is not None
    graph, open_s = stages.load_stage(
        synthetic, lambda _: open_stream(spec.dataset, env.data_dir), out
    )
    algorithms.check_num_partitions(graph.num_nodes, k)
    log.info(
        "streaming %s: %d nodes, about %d edge pairs, %d features, %d classes",
        graph.name,
        graph.num_nodes,
        graph.edge_pairs_hint,
        graph.num_features,
        graph.num_classes,
    )
    how: dict[str, Any] = {"method": "random"}

    def assign() -> npt.NDArray[np.int32]:
        if not sampled:
            return algorithms.random_assignment(graph.num_nodes, k, part_spec.seed)
        parts, found = sampled_metis_assignment(
            graph, k, sample_edges=part_spec.metis_sample_edges, seed=part_spec.seed
        )
        how.update(found)
        return parts

    store, assign_s, write_s = stages.partition_stage(
        assign,
        lambda assignment, progress: write_streamed(
            env.partition_dir,
            graph,
            assignment,
            k,
            spec=part_spec,
            key=config.partition_key,
            extra_meta={**stages.store_meta(config), "out_of_core_assignment": how},
            progress=progress,
        ),
        out,
    )
    log.info(
        "edge cut: %d of %d undirected edges (%.4f; a random assignment cuts about %.4f)",
        store.meta.edge_cut,
        store.meta.num_undirected_edges,
        store.meta.edge_cut_fraction,
        1 - 1 / k,
    )
    return store, {
        "generate" if synthetic else "load": open_s,
        "partition": assign_s,
        "write": write_s,
    }
