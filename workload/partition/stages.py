"""The partition Job's timed stages with their progress events, shared by the homogeneous
and the typed paths: load (or generate) the graph, then assign its nodes and write the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypeVar

from distgnn_api.contract import (
    STAGE_GENERATE,
    STAGE_LOAD,
    STAGE_PARTITION,
    JobConfig,
    emit_progress,
)
from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition import algorithms
from distgnn_workload.partition.hetero_store import HeteroPartitionMeta
from distgnn_workload.partition.store import PartitionMeta, PartitionStore
from distgnn_workload.partition.writer import ExtraWriter, write_partitions

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


def partition_graph(
    graph: GraphData,
    target: Path,
    config: JobConfig,
    out: TextIO,
    *,
    extra_meta: Mapping[str, Any] | None = None,
    extra_writer: ExtraWriter | None = None,
) -> tuple[PartitionStore, float, float]:
    """A homogeneous graph held in memory, assigned and written at ``target`` under the
    partition stage (the node and the link path's); the store and the seconds of each step.
    ``extra_meta`` and ``extra_writer`` add to the store what a task needs."""
    spec = config.spec
    k = spec.num_partitions
    return partition_stage(
        lambda: algorithms.assign(graph, k, spec.partition),
        lambda assignment, progress: write_partitions(
            target,
            graph,
            k,
            assignment=assignment,
            spec=spec.partition,
            key=config.partition_key,
            extra_meta={**store_meta(config), **(extra_meta or {})},
            progress=progress,
            extra_writer=extra_writer,
        ),
        out,
    )


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
