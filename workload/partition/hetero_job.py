"""The partition Job's path for a heterogeneous dataset: load it typed, check it against the
spec, partition it (METIS on the homogeneous view, or random) and write the typed store.
A link-prediction job's supervised edges are split first (:func:`.link_edges.split_typed_edges`): the
store's topology holds the training edges only, and the split is written into it.

:mod:`.job` calls :func:`partition_hetero` after its reuse check; the exit codes and the
progress stages are the homogeneous path's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TextIO

from distgnn_api.contract import (
    JobConfig,
    WorkloadEnv,
)
from distgnn_api.hetero_load import HeteroMismatch, resolve_edge_fanouts
from distgnn_workload.data.dataset import dataset_kind, load_hetero_spec
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.partition import algorithms, stages
from distgnn_workload.partition.algorithms import TypedAssignment
from distgnn_workload.partition.hetero_store import HeteroPartitionStore
from distgnn_workload.partition.hetero_writer import write_hetero_partitions
from distgnn_workload.partition.link_edges import split_typed_edges
from distgnn_workload.partition.link_split import split_writer
from distgnn_workload.partition.writer import ExtraWriter

log = logging.getLogger("distgnn_workload.partition")


def check_against_spec(graph: HeteroGraphData, config: JobConfig) -> None:
    """What admission could not check before the files were read: the model's per-edge-type
    fanouts must name edge types of the loaded graph (reverses included)."""
    model = config.spec.model
    try:
        resolve_edge_fanouts(model.fanout, model.edge_fanouts, graph.edge_types)
    except HeteroMismatch as err:
        raise DatasetError(str(err).removeprefix(f"{err.field}: "), source=err.field) from None


def _no_extra(_: TypedAssignment) -> ExtraWriter | None:
    return None


def partition_hetero(
    env: WorkloadEnv, config: JobConfig, out: TextIO
) -> tuple[HeteroPartitionStore, dict[str, float]]:
    """Load, check, partition and write the typed store; returns it and the step timings."""
    spec = config.spec
    kind = dataset_kind(spec.dataset)
    graph, load_s = stages.load_stage(
        kind == "synthetic_mag",
        lambda progress: load_hetero_spec(spec.dataset, env.data_dir, progress=progress),
        out,
    )
    check_against_spec(graph, config)
    extra: Callable[[TypedAssignment], ExtraWriter | None] = _no_extra
    lp = spec.link_prediction
    if spec.is_link_prediction and lp is not None:
        graph, split = split_typed_edges(graph, lp, spec.partition.seed)
        src_t, _, dst_t = split.edge_type
        n_dst = graph.node_counts[dst_t]
        log.info("link split: %s", split.info)

        def extra(assignment: TypedAssignment) -> ExtraWriter | None:
            return split_writer(split, assignment[src_t], spec.num_partitions, n_dst)

    log.info(
        "%s graph %s: %s; %d edges over %d edge types (%.1f s)",
        kind,
        graph.name,
        ", ".join(f"{n:,} {t}" for t, n in graph.node_counts.items()),
        graph.num_edges(),
        len(graph.edge_types),
        load_s,
    )
    k = spec.num_partitions
    store, assign_s, write_s = stages.partition_stage(
        lambda: algorithms.assign(graph, k, spec.partition),
        lambda assignment, progress: write_hetero_partitions(
            env.partition_dir,
            graph,
            k,
            assignment=assignment,
            spec=spec.partition,
            key=config.partition_key,
            extra_meta=stages.store_meta(config),
            progress=progress,
            extra_writer=extra(assignment),
        ),
        out,
    )
    steps = {
        "generate" if kind == "synthetic_mag" else "load": load_s,
        "partition": assign_s,
        "write": write_s,
    }
    return store, steps


def hetero_summary(store: HeteroPartitionStore, steps: dict[str, float]) -> str:
    """A human-readable account of a typed store and the time each step took."""
    m = store.meta
    types = list(m.node_types)
    lines = [
        f"partitioned {m.name}: "
        + ", ".join(f"{m.node_counts[t]:,} {t}" for t in types)
        + f"; {sum(m.edge_counts.values()):,} edges over {len(m.edge_types)} edge types; "
        f"target {m.target_node_type}, {m.num_classes} classes",
        *stages.summary_lines(store.path, m, steps, "typed edges"),
        "  part       " + "".join(f"{t:<16}" for t in types) + "train      in-edges",
    ]
    for s in m.partitions:
        lines.append(
            f"  {s.id:<10} "
            + "".join(f"{s.num_nodes[t]:<16,}" for t in types)
            + f"{s.num_train:<10,} {sum(s.num_in_edges.values()):,}"
        )
    return "\n".join(lines)
