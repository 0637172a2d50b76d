"""The out-of-core store writer: the same store as :mod:`.writer`, from a streamed graph.

Input: a :class:`~distgnn_workload.data.stream.StreamedGraph` (edges and feature rows read
in chunks) and the partition of every node. Nodes are relabelled exactly as the in-memory
writer does (partition, then original id), the edges go through the external bucket sort
of :mod:`.external_sort` (spilled under the staging directory, removed before publishing),
and every array is appended to its ``.npy`` file chunk by chunk. Memory: a few node-sized
arrays (the id maps, degrees, the halo flags, labels and masks), one bucket of edges, and
one block of feature rows per step. For the same graph and assignment the store is the
in-memory writer's, array for array; META.json differs only in timings and ``graph_info``.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import PartitionSpec
from distgnn_workload.data.csr import index_dtype
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.stream import StreamedGraph
from distgnn_workload.partition.external_sort import BUCKET_EDGES, EdgeBuckets, bucket_bounds
from distgnn_workload.partition.meta import (
    FEATURES_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    TOPOLOGY_DIR,
    is_complete,
    part_dir_name,
)
from distgnn_workload.partition.npy_append import GrowingNpyWriter, NpyWriter, save_array
from distgnn_workload.partition.part_files import save_id_maps, save_part_nodes
from distgnn_workload.partition.publish import stage_store
from distgnn_workload.partition.relabel import meta_record, part_order
from distgnn_workload.partition.store import PartitionStore

log = logging.getLogger(__name__)

ProgressFn = Callable[[float], None]
SPILL_DIR = ".spill"
"""Folder of the bucket files inside the staging directory (gone before publishing)."""
SPILL_SHARE = 0.6
"""Share of the writer's progress given to spilling the edges."""


def write_streamed(
    out_dir: str | Path,
    graph: StreamedGraph,
    assignment: npt.NDArray[np.integer[Any]],
    num_partitions: int,
    *,
    spec: PartitionSpec | None = None,
    key: str | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    budget: int = BUCKET_EDGES,
    progress: ProgressFn | None = None,
) -> PartitionStore:
    """Write the store of ``graph`` partitioned by ``assignment`` at ``out_dir``."""
    out_dir = Path(out_dir)
    if is_complete(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} already holds a complete store; pass overwrite=True")
    parts = np.asarray(assignment).astype(np.int32, copy=False)
    if parts.shape != (graph.num_nodes,):
        raise ValueError(f"assignment must have shape ({graph.num_nodes},)")
    steps: dict[str, float] = {}
    info: dict[str, Any] = dict(graph.info)
    return stage_store(
        out_dir,
        lambda tmp: _write(tmp, graph, parts, num_partitions, budget, steps, info, progress),
        key=key,
        algorithm=spec.algorithm.value if spec is not None else "given",
        partition_spec=spec.model_dump(mode="json", by_alias=True) if spec else None,
        graph_info=info,
        steps=steps,
        extra_meta={**(extra_meta or {}), "out_of_core": True},
        overwrite=overwrite,
        reopen=PartitionStore.open,
    )


def _write(
    root: Path,
    graph: StreamedGraph,
    assignment: npt.NDArray[np.int32],
    k: int,
    budget: int,
    steps: dict[str, float],
    info: dict[str, Any],
    progress: ProgressFn | None,
) -> dict[str, Any]:
    report = progress or (lambda _: None)
    n = graph.num_nodes
    idx = index_dtype(n)
    t = time.perf_counter()
    counts, offsets, old_of_new, new_of_old = part_order(assignment, k, idx)
    save_id_maps(root, old_of_new, new_of_old, assignment)
    steps["relabel"] = time.perf_counter() - t

    t = time.perf_counter()
    buckets = EdgeBuckets(
        root / SPILL_DIR, bucket_bounds(offsets, 2 * graph.edge_pairs_hint, budget), n, budget
    )
    pairs = 0
    for src, dst in graph.edges():
        buckets.add(new_of_old[src], new_of_old[dst])
        pairs += len(src)
        report(SPILL_SHARE * min(1.0, pairs / max(1, graph.edge_pairs_hint)))
    steps["spill"] = time.perf_counter() - t

    t = time.perf_counter()
    degrees = np.zeros(n, dtype=np.int64)
    stats_edges = _write_topology(root, buckets, offsets, degrees, idx, k)
    shutil.rmtree(root / SPILL_DIR, ignore_errors=True)
    e = int(degrees.sum())
    info["self_loops_dropped"] = buckets.self_loops
    info["duplicate_edges_dropped"] = pairs - buckets.self_loops - e // 2
    steps["write_topology"] = time.perf_counter() - t
    report(SPILL_SHARE + 0.3 * (1 - SPILL_SHARE))

    t = time.perf_counter()
    _write_features(root, graph, assignment, counts, k)
    steps["write_features"] = time.perf_counter() - t

    stats = []
    for p in range(k):
        start, end = int(offsets[p]), int(offsets[p + 1])
        olds = old_of_new[start:end]
        pdir = root / part_dir_name(p)
        cut, halo = stats_edges[p]
        stats.append(
            save_part_nodes(
                pdir,
                p,
                start,
                graph,
                olds,
                num_edges=int(degrees[start:end].sum()),
                num_cut_edges=cut,
                num_halo_nodes=halo,
            )
        )
    report(1.0)
    return meta_record(graph, n, e, e // 2, offsets, idx, stats)


def _write_topology(
    root: Path,
    buckets: EdgeBuckets,
    offsets: npt.NDArray[np.int64],
    degrees: npt.NDArray[np.int64],
    idx: np.dtype[Any],
    k: int,
) -> list[tuple[int, int]]:
    """The CSR files (whole and per partition) from the sorted buckets; fills ``degrees``
    and returns each partition's (cut edges, halo nodes)."""
    (root / TOPOLOGY_DIR).mkdir()
    for p in range(k):
        (root / part_dir_name(p)).mkdir()
    halo = np.zeros(len(degrees), dtype=np.bool_)
    found: list[tuple[int, int]] = []
    blocks = buckets.rows()
    pending = next(blocks, None)
    with GrowingNpyWriter(root / TOPOLOGY_DIR / INDICES_FILE, idx) as topo:
        for p in range(k):
            start, end = int(offsets[p]), int(offsets[p + 1])
            cut = 0
            halo[:] = False
            with GrowingNpyWriter(root / part_dir_name(p) / INDICES_FILE, idx) as part:
                while pending is not None and pending.start < end:
                    targets = pending.targets
                    degrees[pending.start : pending.end] = pending.degrees
                    topo.append(targets)
                    part.append(targets)
                    remote = targets[(targets < start) | (targets >= end)]
                    cut += len(remote)
                    halo[remote] = True
                    pending = next(blocks, None)
            found.append((cut, int(np.count_nonzero(halo))))
    indptr = np.zeros(len(degrees) + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    save_array(root / TOPOLOGY_DIR / INDPTR_FILE, indptr)
    for q in range(k):
        start, end = int(offsets[q]), int(offsets[q + 1])
        save_array(root / part_dir_name(q) / INDPTR_FILE, indptr[start : end + 1] - indptr[start])
    return found


def _write_features(
    root: Path,
    graph: StreamedGraph,
    assignment: npt.NDArray[np.int32],
    counts: npt.NDArray[np.int64],
    k: int,
) -> None:
    """Route each block of feature rows to its partitions' files, keeping node order."""
    f = graph.num_features
    with contextlib.ExitStack() as stack:
        writers = [
            stack.enter_context(
                NpyWriter(root / part_dir_name(p) / FEATURES_FILE, np.float32, (int(counts[p]), f))
            )
            for p in range(k)
        ]
        a = 0
        for block in graph.features():
            b = a + len(block)
            if b > graph.num_nodes:
                break
            parts = assignment[a:b]
            order = np.argsort(parts, kind="stable")
            sizes = np.bincount(parts, minlength=k)
            block = block[order]
            at = 0
            for p in np.flatnonzero(sizes):
                writers[p].append(block[at : at + sizes[p]])
                at += int(sizes[p])
            a = b
        if a != graph.num_nodes:
            raise DatasetError(
                f"graph {graph.name!r}: feature rows do not match its {graph.num_nodes} nodes"
            )
