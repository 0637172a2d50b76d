"""Writer of the partition store: relabel, stream the arrays to disk, publish atomically.

Nodes are relabelled so that partition p owns the contiguous new ids
``[offsets[p], offsets[p+1])`` (stable order: partition, then original id). The CSR is
re-emitted row by row in new ids, in chunks of a few million edges, and appended to the
``.npy`` files as it goes: besides the input graph, the writer holds only the id maps
and one chunk. Everything is written into a temporary sibling directory with ``_SUCCESS``
last; one ``rename`` then publishes the whole store, so a crash at any point leaves no
directory that looks complete.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Protocol

import numpy as np
import numpy.typing as npt

from distgnn_api.contract import PARTITION_FORMAT_VERSION
from distgnn_api.spec import PartitionSpec
from distgnn_workload.data.csr import EDGE_CHUNK, index_dtype
from distgnn_workload.data.graph import GraphData
from distgnn_workload.data.host_threads import run_parallel
from distgnn_workload.partition import algorithms
from distgnn_workload.partition.publish import (
    stage_store,
)
from distgnn_workload.partition.store import (
    FEATURES_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    LABELS_FILE,
    MASK_FILES,
    NEW_IDS_FILE,
    ORIG_IDS_FILE,
    PARTITION_BOOK_FILE,
    TOPOLOGY_DIR,
    PartitionStats,
    PartitionStore,
    is_complete,
    part_dir_name,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[float], None]
"""Called with the share of the writing done, from 0 to 1."""
ExtraWriter = Callable[[Path, dict[str, Any]], None]
"""Writes more files into a store being written, and may add to its META.json."""

# Bytes of feature rows copied per step.
_FEATURE_CHUNK_BYTES = 64 << 20
SORT_SLICES = 64
"""Slices of whole rows that sort a partition's neighbour lists in parallel."""


class NpyWriter:
    """Appends chunks to a ``.npy`` file of known shape, without memory-mapping it."""

    def __init__(self, path: Path, dtype: npt.DTypeLike, shape: tuple[int, ...]) -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.expected = int(np.prod(shape, dtype=np.int64))
        self.written = 0
        self._f: BinaryIO = open(path, "wb")  # noqa: SIM115 (closed in close())
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_2_0(self._f, header)

    def append(self, chunk: npt.NDArray[Any]) -> None:
        data = np.ascontiguousarray(chunk, dtype=self.dtype)
        self.written += data.size
        if self.written > self.expected:
            raise RuntimeError(f"{self.path}: more than {self.expected} elements written")
        self._f.write(data.data)

    def close(self) -> None:
        if self.written != self.expected:
            raise RuntimeError(f"{self.path}: wrote {self.written} of {self.expected} elements")
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._f.close()


def save_array(path: Path, array: npt.NDArray[Any]) -> None:
    with NpyWriter(path, array.dtype, array.shape) as w:
        w.append(array)


def row_chunks(indptr: npt.NDArray[np.int64], start: int, end: int, budget: int) -> list[int]:
    """Row boundaries splitting rows [start, end) into runs of about ``budget`` edges."""
    if end <= start:
        return [start, end]
    targets = np.arange(indptr[start], indptr[end], budget, dtype=np.int64)
    bounds = np.searchsorted(indptr, targets, side="right") - 1
    bounds = np.clip(bounds, start, end)
    return sorted({start, end, *bounds.tolist()})


def _ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Concatenation of ``arange(s, s + l)`` for each (s, l), vectorised."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


def balance(values: npt.NDArray[Any]) -> float:
    """Largest over mean; 1.0 is perfect balance."""
    mean = float(values.mean()) if len(values) else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0


def write_partitions(
    out_dir: str | Path,
    graph: GraphData,
    num_partitions: int | None = None,
    *,
    assignment: npt.NDArray[np.integer[Any]] | None = None,
    spec: PartitionSpec | None = None,
    key: str | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    extra_writer: ExtraWriter | None = None,
) -> PartitionStore:
    """Partition ``graph`` and write a complete store at ``out_dir``; return it opened.

    ``extra_writer(root, meta)``, when given, adds files to the store being written (its
    arrays are all there, META.json not yet) and may add to ``meta``; the store is
    published with them.

    Give ``num_partitions`` and ``spec`` chooses the algorithm (default: METIS balancing
    nodes, train nodes and edges), or give ``assignment``, the partition of each node
    (with ``spec`` when it was computed by that spec, for META.json). Tests build small
    stores with e.g. ``write_partitions(tmp / "p", g, 2)``.
    """
    out_dir = Path(out_dir)
    if is_complete(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} already holds a complete store; pass overwrite=True")
    given_spec = spec is not None
    spec = spec or PartitionSpec()
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    if assignment is None:
        if num_partitions is None:
            raise ValueError("give num_partitions or assignment")
        assignment = algorithms.assign(graph, num_partitions, spec)
        algorithm = spec.algorithm.value
        steps["assign"] = time.perf_counter() - t0
    else:
        assignment = np.asarray(assignment)
        if assignment.shape != (graph.num_nodes,):
            raise ValueError(f"assignment must have shape ({graph.num_nodes},)")
        if num_partitions is None:
            num_partitions = int(assignment.max()) + 1 if len(assignment) else 1
        if len(assignment) and (assignment.min() < 0 or assignment.max() >= num_partitions):
            raise ValueError(f"assignment values must lie in [0, {num_partitions})")
        # With a spec, the caller computed the assignment by it; without, it is the caller's own.
        algorithm = spec.algorithm.value if given_spec else "given"
    assert num_partitions is not None
    parts: npt.NDArray[np.int32] = assignment.astype(np.int32, copy=False)

    def write(tmp: Path) -> dict[str, Any]:
        meta = _write_store(tmp, graph, parts, num_partitions, steps=steps, progress=progress)
        if extra_writer is not None:
            extra_writer(tmp, meta)
        return meta

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
        reopen=PartitionStore.open,
    )


def _write_store(
    root: Path,
    graph: GraphData,
    assignment: npt.NDArray[np.int32],
    k: int,
    *,
    steps: dict[str, float],
    progress: ProgressFn | None,
) -> dict[str, Any]:
    """Write every array of the store under ``root``; return META.json's graph part."""
    n, e = graph.num_nodes, graph.num_edges
    idx = index_dtype(n)
    t = time.perf_counter()

    counts = np.bincount(assignment, minlength=k).astype(np.int64)
    offsets = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    old_of_new = np.argsort(assignment, kind="stable").astype(idx)
    new_of_old = np.empty(n, dtype=idx)
    new_of_old[old_of_new] = np.arange(n, dtype=idx)
    part_of_new = np.repeat(np.arange(k, dtype=np.int32), counts)
    deg = graph.degrees()
    new_indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg[old_of_new], out=new_indptr[1:])
    steps["relabel"] = time.perf_counter() - t

    (root / TOPOLOGY_DIR).mkdir()
    save_array(root / TOPOLOGY_DIR / INDPTR_FILE, new_indptr)
    save_array(root / ORIG_IDS_FILE, old_of_new)
    save_array(root / NEW_IDS_FILE, new_of_old)
    save_array(root / PARTITION_BOOK_FILE, assignment)

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
                    rows = _rows_in_new_ids(graph, old_of_new[a:b], new_of_old, n)
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
            save_array(pdir / LABELS_FILE, graph.y[olds])
            for split, file in MASK_FILES.items():
                save_array(pdir / file, getattr(graph, f"{split}_mask")[olds])
            save_array(pdir / ORIG_IDS_FILE, olds)
            stats.append(
                PartitionStats(
                    id=p,
                    start=start,
                    end=end,
                    num_nodes=end - start,
                    num_edges=int(p_indptr[-1]),
                    num_train=int(np.count_nonzero(graph.train_mask[olds])),
                    num_val=int(np.count_nonzero(graph.val_mask[olds])),
                    num_test=int(np.count_nonzero(graph.test_mask[olds])),
                    num_cut_edges=cut,
                    num_halo_nodes=int(np.count_nonzero(halo)),
                )
            )
    steps["write_features"] = t_feat
    steps["write_topology"] = time.perf_counter() - t - t_feat
    if progress:
        progress(1.0)

    return meta_record(graph, n, e, graph.num_undirected_edges, offsets, idx, stats)


class MetaSource(Protocol):
    """What a store's META.json record reads of the graph it partitioned."""

    @property
    def name(self) -> str: ...
    @property
    def num_features(self) -> int: ...
    @property
    def num_classes(self) -> int: ...
    @property
    def train_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def val_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def test_mask(self) -> npt.NDArray[np.bool_]: ...


def meta_record(
    graph: MetaSource,
    n: int,
    e: int,
    und: int,
    offsets: npt.NDArray[Any],
    idx: np.dtype[Any],
    stats: list[PartitionStats],
) -> dict[str, Any]:
    """The META.json record of a homogeneous store (in-memory and out-of-core writers)."""
    k = len(stats)
    edge_cut = sum(s.num_cut_edges for s in stats) // 2
    return {
        "format_version": PARTITION_FORMAT_VERSION,
        "name": graph.name,
        "num_nodes": n,
        "num_edges": e,
        "num_undirected_edges": und,
        "num_features": graph.num_features,
        "num_classes": graph.num_classes,
        "num_partitions": k,
        "offsets": offsets.tolist(),
        "edge_cut": edge_cut,
        "edge_cut_fraction": edge_cut / und if und else 0.0,
        "index_dtype": idx.name,
        "num_train_nodes": int(np.count_nonzero(graph.train_mask)),
        "num_val_nodes": int(np.count_nonzero(graph.val_mask)),
        "num_test_nodes": int(np.count_nonzero(graph.test_mask)),
        "partitions": [s.__dict__ for s in stats],
        "balance": {
            "nodes": balance(np.array([s.num_nodes for s in stats])),
            "train_nodes": balance(np.array([s.num_train for s in stats])),
            "edges": balance(np.array([s.num_edges for s in stats])),
        },
    }


def _rows_in_new_ids(
    graph: GraphData,
    olds: npt.NDArray[Any],
    new_of_old: npt.NDArray[Any],
    n: int,
) -> npt.NDArray[Any]:
    """The neighbour lists of old nodes ``olds``, in new ids, each row sorted, concatenated."""
    olds64 = olds.astype(np.int64)
    starts = graph.indptr[olds64]
    lengths = graph.indptr[olds64 + 1] - starts
    vals = new_of_old[graph.indices[_ranges(starts, lengths)]]
    row = np.repeat(np.arange(len(olds), dtype=np.int64), lengths)
    keys = row * np.int64(n) + vals
    del row, vals
    # rows come in order, so only each row's values need sorting: slices of whole rows
    # sort on their own, on all cores (the same result as one keys.sort())
    ends = np.cumsum(lengths)
    targets = np.linspace(0, len(keys), SORT_SLICES + 1)[1:-1]
    cuts = np.searchsorted(ends, targets, side="left") if len(keys) else np.zeros(0, np.int64)
    bounds = [0, *sorted({int(ends[c]) for c in cuts}), len(keys)]
    run_parallel(_sort_slice, [(keys, a, b) for a, b in itertools.pairwise(bounds) if b > a])
    out: npt.NDArray[Any] = (keys % np.int64(n)).astype(new_of_old.dtype)
    return out


def _sort_slice(keys: npt.NDArray[np.int64], a: int, b: int) -> None:
    keys[a:b].sort()
