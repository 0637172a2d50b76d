"""The partition Job's timed stages with their progress events, shared by the homogeneous
and the typed paths: load (or generate) the graph, then assign its nodes and write the store.

A typed dataset's whole path is here (:func:`partition_typed`): load it typed, check it
against the spec, partition it and write the typed store. A link-prediction job's supervised
edges are split first (:func:`.link_edges.split_typed_edges`): the store's topology holds
the training edges only, and the split is written into it. ``partitioner.job`` calls it
after its reuse check; the exit codes and the progress stages are the homogeneous path's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypeVar, overload

from distgnn_api.contract import (
    STAGE_GENERATE,
    STAGE_LOAD,
    STAGE_PARTITION,
    JobConfig,
    WorkloadEnv,
    emit_progress,
)
from distgnn_api.hetero_load import HeteroMismatch, resolve_edge_fanouts
from distgnn_workload.data.dataset import dataset_kind, load_hetero_spec
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, HeteroGraphData
from distgnn_workload.partition import algorithms
from distgnn_workload.partition.link_edges import split_typed_edges
from distgnn_workload.partition.link_split import split_writer
from distgnn_workload.partition.meta import HeteroPartitionMeta, PartitionMeta
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore
from distgnn_workload.partition.writer import ExtraWriter, write_partitions

log = logging.getLogger("distgnn_workload.partition")

G = TypeVar("G")
A = TypeVar("A")
S = TypeVar("S")

ProgressFn = Callable[[float], None]

ASSIGN_SHARE = 0.4
"""Share of the partition stage's progress bar given to the assignment (METIS reports none)."""


def load_stage(generated: bool, load: Callable[[ProgressFn], G], out: TextIO) -> tuple[G, float]:
    """``load(progress)`` under the generate or load stage; returns the graph and seconds."""
    stage = STAGE_GENERATE if generated else STAGE_LOAD
    t0 = time.perf_counter()
    emit_progress(stage, 0.0, 1.0, stream=out)
    graph = load(lambda f: emit_progress(stage, round(f, 4), 1.0, stream=out))
    return graph, time.perf_counter() - t0


def partition_stage(
    assign: Callable[[], A], write: Callable[[A, ProgressFn], S], out: TextIO
) -> tuple[S, float, float]:
    """``assign()`` then ``write(assignment, progress)`` under the partition stage; returns
    the store and the seconds of each."""
    t1 = time.perf_counter()
    emit_progress(STAGE_PARTITION, 0.0, 1.0, stream=out)
    assignment = assign()
    assign_s = time.perf_counter() - t1
    emit_progress(STAGE_PARTITION, ASSIGN_SHARE, 1.0, stream=out)
    t2 = time.perf_counter()
    store = write(
        assignment,
        lambda f: emit_progress(
            STAGE_PARTITION, round(ASSIGN_SHARE + (1 - ASSIGN_SHARE) * f, 4), 1.0, stream=out
        ),
    )
    return store, assign_s, time.perf_counter() - t2


@overload
def partition_graph(
    graph: GraphData,
    target: Path,
    config: JobConfig,
    out: TextIO,
    *,
    extra_meta: Mapping[str, Any] | None = None,
    extra_writer: ExtraWriter | None = None,
) -> tuple[PartitionStore, float, float]: ...
@overload
def partition_graph(
    graph: HeteroGraphData,
    target: Path,
    config: JobConfig,
    out: TextIO,
    *,
    extra_meta: Mapping[str, Any] | None = None,
    extra_writer: ExtraWriter | None = None,
) -> tuple[HeteroPartitionStore, float, float]: ...
def partition_graph(
    graph: GraphData | HeteroGraphData,
    target: Path,
    config: JobConfig,
    out: TextIO,
    *,
    extra_meta: Mapping[str, Any] | None = None,
    extra_writer: ExtraWriter | None = None,
) -> tuple[PartitionStore | HeteroPartitionStore, float, float]:
    """A graph held in memory (either kind), assigned and written at ``target`` under the
    partition stage (every in-memory path's); the store and the seconds of each step.
    ``extra_meta`` and ``extra_writer`` add to the store what a task needs."""
    spec = config.spec
    k = spec.num_partitions
    meta = {**store_meta(config), **(extra_meta or {})}

    def write(parts: Any, progress: ProgressFn) -> PartitionStore | HeteroPartitionStore:
        return write_partitions(
            target,
            graph,
            k,
            assignment=parts,
            spec=spec.partition,
            key=config.partition_key,
            extra_meta=meta,
            progress=progress,
            extra_writer=extra_writer,
        )

    return partition_stage(lambda: algorithms.assign(graph, k, spec.partition), write, out)


def summary_lines(
    path: Path,
    meta: PartitionMeta | HeteroPartitionMeta,
    steps: Mapping[str, float],
    edges: str = "edges",
) -> list[str]:
    """The lines of a store's summary that every graph kind prints: where it is, how it was
    cut (``edges``: what the cut counts), its balance and the time of each step."""
    m = meta
    return [
        f"  store      {path}",
        f"  algorithm  {m.algorithm}, {m.num_partitions} partitions",
        f"  edge cut   {m.edge_cut:,} ({100 * m.edge_cut_fraction:.1f}% of {edges})",
        "  balance    "
        + ", ".join(f"{name} {value:.3f}" for name, value in m.balance.items())
        + " (largest / mean)",
        "  time       " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in steps.items()),
    ]


def store_meta(config: JobConfig) -> dict[str, Any]:
    """What a store's META.json records of the job that wrote it."""
    spec = config.spec
    return {
        "dataset": spec.dataset.model_dump(mode="json", by_alias=True, exclude_none=True),
        "job": {"name": config.name, "namespace": config.namespace, "uid": config.uid},
    }


def check_against_spec(graph: HeteroGraphData, config: JobConfig) -> None:
    """What admission could not check before the files were read: the model's per-edge-type
    fanouts must name edge types of the loaded graph (reverses included)."""
    model = config.spec.model
    try:
        resolve_edge_fanouts(model.fanout, model.edge_fanouts, graph.edge_types)
    except HeteroMismatch as err:
        raise DatasetError(str(err).removeprefix(f"{err.field}: "), source=err.field) from None


def partition_typed(
    env: WorkloadEnv, config: JobConfig, out: TextIO
) -> tuple[HeteroPartitionStore, dict[str, float]]:
    """Load, check, partition and write the typed store; returns it and the step timings."""
    spec = config.spec
    kind = dataset_kind(spec.dataset)
    graph, load_s = load_stage(
        kind == "synthetic_mag",
        lambda progress: load_hetero_spec(spec.dataset, env.data_dir, progress=progress),
        out,
    )
    check_against_spec(graph, config)
    extra: ExtraWriter | None = None
    lp = spec.link_prediction
    if spec.is_link_prediction and lp is not None:
        graph, split = split_typed_edges(graph, lp, spec.partition.seed)
        log.info("link split: %s", split.info)
        extra = split_writer(split, spec.num_partitions, graph.node_counts[split.edge_type[2]])
    log.info(
        "%s graph %s: %s; %d edges over %d edge types (%.1f s)",
        kind,
        graph.name,
        ", ".join(f"{n:,} {t}" for t, n in graph.node_counts.items()),
        graph.num_edges(),
        len(graph.edge_types),
        load_s,
    )
    store, assign_s, write_s = partition_graph(
        graph, env.partition_dir, config, out, extra_writer=extra
    )
    steps = {
        "generate" if kind == "synthetic_mag" else "load": load_s,
        "partition": assign_s,
        "write": write_s,
    }
    return store, steps


def typed_summary(store: HeteroPartitionStore, steps: dict[str, float]) -> str:
    """A human-readable account of a typed store and the time each step took."""
    m = store.meta
    types = list(m.node_types)
    lines = [
        f"partitioned {m.name}: "
        + ", ".join(f"{m.node_counts[t]:,} {t}" for t in types)
        + f"; {sum(m.edge_counts.values()):,} edges over {len(m.edge_types)} edge types; "
        f"target {m.target_node_type}, {m.num_classes} classes",
        *summary_lines(store.path, m, steps, "typed edges"),
        "  part       " + "".join(f"{t:<16}" for t in types) + "train      in-edges",
    ]
    for s in m.partitions:
        lines.append(
            f"  {s.id:<10} "
            + "".join(f"{s.num_nodes[t]:<16,}" for t in types)
            + f"{s.num_train:<10,} {sum(s.num_in_edges.values()):,}"
        )
    return "\n".join(lines)
