"""Writer of the partition store, for every graph: :func:`write_partitions` assigns the
nodes (or takes an assignment), writes the store's arrays into a temporary sibling
directory with ``_SUCCESS`` last, and publishes it with one ``rename``
(:func:`.publish.stage_store`), so a crash at any point leaves no directory that looks
complete.

A homogeneous graph's store relabels its nodes so that partition p owns the contiguous new
ids ``[offsets[p], offsets[p+1])`` (stable order: partition, then original id); the CSR is
re-emitted row by row in new ids, in chunks of a few million edges, and appended to the
``.npy`` files as it goes (:mod:`.relabel`): besides the input graph, the writer holds only
the id maps and one chunk. A typed graph's store keeps the dataset's
ids: it copies each edge type's in-CSR once, writes the owner of every typed node, and per
partition its owned ids and their feature, label and split rows.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack, overload

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import edge_type_key
from distgnn_api.spec import PartitionSpec
from distgnn_workload.data.csr import EDGE_CHUNK, index_dtype
from distgnn_workload.data.graph import GraphData, HeteroGraphData
from distgnn_workload.partition import algorithms
from distgnn_workload.partition.algorithms import Assignment, TypedAssignment
from distgnn_workload.partition.figures import _HaloSet, typed_meta_record
from distgnn_workload.partition.meta import (
    FEATURES_DIR,
    FEATURES_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    NODES_DIR,
    OWNER_DIR,
    TOPOLOGY_DIR,
    HeteroPartitionStats,
    PartitionStats,
    is_complete,
    npy_name,
    part_dir_name,
)
from distgnn_workload.partition.npy_append import NpyWriter, save_array
from distgnn_workload.partition.part_files import save_id_maps, save_labels, save_part_nodes
from distgnn_workload.partition.publish import stage_store
from distgnn_workload.partition.relabel import (
    meta_record,
    part_order,
    row_chunks,
    rows_in_new_ids,
)
from distgnn_workload.partition.store import HeteroPartitionStore, PartitionStore

log = logging.getLogger(__name__)

ProgressFn = Callable[[float], None]
"""Called with the share of the writing done, from 0 to 1."""
ExtraWriter = Callable[[Path, dict[str, Any]], None]
"""Writes more files into a store being written, and may add to its META.json."""

# Bytes of feature rows copied per step.
_FEATURE_CHUNK_BYTES = 64 << 20


class WriteOptions(TypedDict, total=False):
    """What :func:`write_partitions` takes beside the graph and its assignment."""

    spec: PartitionSpec | None
    key: str | None
    extra_meta: Mapping[str, Any] | None
    overwrite: bool
    progress: ProgressFn | None
    extra_writer: ExtraWriter | None


@overload
def write_partitions(
    out_dir: str | Path,
    graph: GraphData,
    num_partitions: int | None = None,
    *,
    assignment: npt.ArrayLike | None = None,
    **options: Unpack[WriteOptions],
) -> PartitionStore: ...
@overload
def write_partitions(
    out_dir: str | Path,
    graph: HeteroGraphData,
    num_partitions: int | None = None,
    *,
    assignment: Mapping[str, npt.ArrayLike] | None = None,
    **options: Unpack[WriteOptions],
) -> HeteroPartitionStore: ...
def write_partitions(
    out_dir: str | Path,
    graph: GraphData | HeteroGraphData,
    num_partitions: int | None = None,
    *,
    assignment: npt.ArrayLike | Mapping[str, npt.ArrayLike] | None = None,
    spec: PartitionSpec | None = None,
    key: str | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    extra_writer: ExtraWriter | None = None,
) -> PartitionStore | HeteroPartitionStore:
    """Partition ``graph`` and write a complete store at ``out_dir``; return it opened.

    Give ``num_partitions`` and ``spec`` chooses the algorithm (default: METIS balancing
    nodes (each type's), train nodes and edges), or give ``assignment``: the partition of
    each node (per node type, of each type-local id, for a typed graph), with ``spec`` when
    it was computed by that spec, for META.json. ``extra_writer(root, meta)``, when given,
    adds files to the store being written (its arrays are all there, META.json not yet) and
    may add to ``meta`` (a link job's edge split); the store is published with them. Tests
    build small stores with e.g. ``write_partitions(tmp / "p", g, 2)``.
    """
    out_dir = Path(out_dir)
    if is_complete(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} already holds a complete store; pass overwrite=True")
    given_spec = spec is not None
    spec = spec or PartitionSpec()
    steps: dict[str, float] = {}
    typed = graph if isinstance(graph, HeteroGraphData) else graph.typed()
    t0 = time.perf_counter()
    if assignment is None:
        if num_partitions is None:
            raise ValueError("give num_partitions or assignment")
        # a GraphData is assigned as itself: its own homogeneous view, built no second time
        found = algorithms.assign(graph, num_partitions, spec)
        parts = found if isinstance(found, dict) else {typed.node_types[0]: found}
        algorithm = spec.algorithm.value
        steps["assign"] = time.perf_counter() - t0
    else:
        given = assignment if isinstance(assignment, Mapping) else {typed.node_types[0]: assignment}
        parts = {t: np.asarray(a).astype(np.int32, copy=False) for t, a in given.items()}
        if num_partitions is None:
            num_partitions = 1 + max((int(a.max()) for a in parts.values() if a.size), default=0)
        # With a spec, the caller computed the assignment by it; without, it is the caller's own.
        algorithm = spec.algorithm.value if given_spec else "given"
    k = num_partitions
    algorithms.check_assignment(typed, parts, k)

    def write(tmp: Path) -> dict[str, Any]:
        if isinstance(graph, GraphData):
            one = parts[typed.node_types[0]]
            meta = _write_store(tmp, graph, one, k, steps=steps, progress=progress)
        else:
            meta = _write_typed_store(tmp, graph, parts, k, steps=steps, progress=progress)
        if extra_writer is not None:
            extra_writer(tmp, meta)
        return meta

    reopen: Callable[[Path], PartitionStore | HeteroPartitionStore] = (
        PartitionStore.open if isinstance(graph, GraphData) else HeteroPartitionStore.open
    )
    return stage_store(
        out_dir,
        write,
        key=key,
        partition_spec=(
            spec.model_dump(mode="json", by_alias=True) if algorithm != "given" else None
        ),
        algorithm=algorithm,
        graph_info=graph.info,
        steps=steps,
        extra_meta=extra_meta,
        overwrite=overwrite,
        reopen=reopen,
    )


def _write_store(
    root: Path,
    graph: GraphData,
    assignment: Assignment,
    k: int,
    *,
    steps: dict[str, float],
    progress: ProgressFn | None,
) -> dict[str, Any]:
    """Write every array of the store under ``root``; return META.json's graph part."""
    n, e = graph.num_nodes, graph.num_edges
    idx = index_dtype(n)
    t = time.perf_counter()

    counts, offsets, old_of_new, new_of_old = part_order(assignment, k, idx)
    part_of_new = np.repeat(np.arange(k, dtype=np.int32), counts)
    deg = graph.degrees()
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg[old_of_new], out=new_indptr[1:])
    steps["relabel"] = time.perf_counter() - t

    (root / TOPOLOGY_DIR).mkdir()
    save_array(root / TOPOLOGY_DIR / INDPTR_FILE, new_indptr)
    save_id_maps(root, old_of_new, new_of_old, assignment)

    feat_bytes = max(1, graph.num_features * 4)
    work_total = float(e + n) or 1.0
    work_done = 0.0
    stats: list[PartitionStats] = []
    halo = np.zeros(n, dtype=np.bool_)
    t = time.perf_counter()
    t_feat = 0.0
    with NpyWriter(root / TOPOLOGY_DIR / INDICES_FILE, idx, (e,)) as topo:
        for p in range(k):
            start, end = int(offsets[p]), int(offsets[p + 1])
            pdir = root / part_dir_name(p)
            pdir.mkdir()
            p_indptr = new_indptr[start : end + 1] - new_indptr[start]
            save_array(pdir / INDPTR_FILE, p_indptr)
            cut = 0
            halo[:] = False
            with NpyWriter(pdir / INDICES_FILE, idx, (int(p_indptr[-1]),)) as pw:
                bounds = row_chunks(new_indptr, start, end, EDGE_CHUNK)
                for a, b in itertools.pairwise(bounds):
                    rows = rows_in_new_ids(graph, old_of_new[a:b], new_of_old, n)
                    topo.append(rows)
                    pw.append(rows)
                    remote = rows[part_of_new[rows] != p]
                    cut += len(remote)
                    halo[remote] = True
                    work_done += len(rows)
                    if progress:
                        progress(work_done / work_total)
            olds = old_of_new[start:end]
            tf = time.perf_counter()
            rows_per_chunk = max(1, _FEATURE_CHUNK_BYTES // feat_bytes)
            with NpyWriter(
                pdir / FEATURES_FILE, np.float32, (end - start, graph.num_features)
            ) as fw:
                for a in range(0, end - start, rows_per_chunk):
                    fw.append(graph.x[olds[a : a + rows_per_chunk]])
                    work_done += min(rows_per_chunk, end - start - a)
                    if progress:
                        progress(work_done / work_total)
            t_feat += time.perf_counter() - tf
            stats.append(
                save_part_nodes(
                    pdir,
                    p,
                    start,
                    graph,
                    olds,
                    num_edges=int(p_indptr[-1]),
                    num_cut_edges=cut,
                    num_halo_nodes=int(np.count_nonzero(halo)),
                )
            )
    steps["write_features"] = t_feat
    steps["write_topology"] = time.perf_counter() - t - t_feat
    if progress:
        progress(1.0)

    return meta_record(graph, n, e, graph.num_undirected_edges, offsets, idx, stats)


def _write_typed_store(
    root: Path,
    graph: HeteroGraphData,
    owner: TypedAssignment,
    k: int,
    *,
    steps: dict[str, float],
    progress: ProgressFn | None,
) -> dict[str, Any]:
    """Write every array under ``root``; return META.json's graph part."""
    report = progress or (lambda _: None)
    target = graph.target_node_type
    t = time.perf_counter()
    (root / OWNER_DIR).mkdir()
    owned: dict[str, list[npt.NDArray[Any]]] = {}
    for nt, parts in owner.items():
        save_array(root / OWNER_DIR / npy_name(nt), parts)
        order = np.argsort(parts, kind="stable").astype(index_dtype(graph.node_counts[nt]))
        bounds = np.searchsorted(parts[order], np.arange(k + 1), side="left")
        owned[nt] = [order[bounds[p] : bounds[p + 1]] for p in range(k)]
    steps["owner"] = time.perf_counter() - t

    # Topology (one copy) and the figures of each edge type's cut.
    t = time.perf_counter()
    total_edges = graph.num_edges() or 1
    done = 0
    in_edges = {edge_type_key(et): np.zeros(k, dtype=np.int64) for et in graph.edge_types}
    cut_in = np.zeros(k, dtype=np.int64)
    cut_by_type: dict[str, int] = {}
    halo = {nt: _HaloSet(k, graph.node_counts[nt]) for nt in graph.node_types}
    (root / TOPOLOGY_DIR).mkdir()
    for et, (indptr, indices) in graph.in_csr.items():
        key = edge_type_key(et)
        src_t, _, dst_t = et
        edir = root / TOPOLOGY_DIR / key
        edir.mkdir()
        save_array(edir / INDPTR_FILE, indptr)
        save_array(edir / INDICES_FILE, indices)
        ns = np.int64(graph.node_counts[src_t])
        deg = np.diff(indptr)
        cut_e = 0
        for a, b in itertools.pairwise(row_chunks(indptr, 0, len(deg), EDGE_CHUNK)):
            pd = np.repeat(owner[dst_t][a:b], deg[a:b])
            src = indices[int(indptr[a]) : int(indptr[b])]
            ps = owner[src_t][src]
            in_edges[key] += np.bincount(pd, minlength=k)
            remote = ps != pd
            cut_in += np.bincount(pd[remote], minlength=k)
            cut_e += int(np.count_nonzero(remote))
            halo[src_t].add(pd[remote].astype(np.int64) * ns + src[remote])
            done += len(src)
            report(0.5 * done / total_edges)
        cut_by_type[key] = cut_e
    halo_counts = {nt: h.per_partition() for nt, h in halo.items()}
    del halo
    steps["write_topology"] = time.perf_counter() - t

    # Per partition: owned ids, their feature rows, the target type's labels and splits.
    t = time.perf_counter()
    stats: list[HeteroPartitionStats] = []
    for p in range(k):
        pdir = root / part_dir_name(p)
        (pdir / NODES_DIR).mkdir(parents=True)
        (pdir / FEATURES_DIR).mkdir()
        for nt in graph.node_types:
            ids = owned[nt][p]
            save_array(pdir / NODES_DIR / npy_name(nt), ids)
            x = graph.x.get(nt)
            if x is not None:
                rows = max(1, _FEATURE_CHUNK_BYTES // max(1, 4 * x.shape[1]))
                with NpyWriter(
                    pdir / FEATURES_DIR / npy_name(nt), np.float32, (len(ids), x.shape[1])
                ) as fw:
                    for a in range(0, len(ids), rows):
                        fw.append(x[ids[a : a + rows]])
        tids = owned[target][p]
        save_labels(pdir, graph, tids)
        stats.append(
            HeteroPartitionStats(
                id=p,
                num_nodes={nt: len(owned[nt][p]) for nt in graph.node_types},
                num_in_edges={key: int(v[p]) for key, v in in_edges.items()},
                num_train=int(np.count_nonzero(graph.train_mask[tids])),
                num_val=int(np.count_nonzero(graph.val_mask[tids])),
                num_test=int(np.count_nonzero(graph.test_mask[tids])),
                num_cut_edges=int(cut_in[p]),
                num_halo_nodes={nt: int(halo_counts[nt][p]) for nt in graph.node_types},
            )
        )
        report(0.5 + 0.5 * (p + 1) / k)
    steps["write_partitions"] = time.perf_counter() - t

    return typed_meta_record(graph, k, stats, cut_by_type)
