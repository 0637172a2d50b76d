"""The in-memory graph every dataset loads into, and the edge-list to CSR builder they share.

A :class:`GraphData` is an undirected graph stored as a CSR that holds both directions of
every edge, sorted within each row, with no self-loops and no duplicates, plus node
features, labels and split masks. All arrays are numpy; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.errors import DatasetError

# Elements handled per vectorised step when streaming over edges: bounds temporaries to
# a few tens of MB each, whatever the graph's size.
EDGE_CHUNK = 1 << 20

IntArray = npt.NDArray[np.integer[Any]]


def index_dtype(num_nodes: int) -> np.dtype[Any]:
    """The narrowest dtype that stores node ids of a graph: int32 below 2^31 nodes."""
    return np.dtype(np.int32) if num_nodes <= np.iinfo(np.int32).max else np.dtype(np.int64)


def chunks(total: int, size: int = EDGE_CHUNK) -> Iterator[tuple[int, int]]:
    """Consecutive [start, end) ranges covering [0, total)."""
    for start in range(0, total, size):
        yield start, min(start + size, total)


@dataclass
class GraphData:
    """An undirected graph with node features, labels and train/val/test splits.

    ``indptr``/``indices`` are a CSR holding each undirected edge in both directions.
    ``num_classes`` is explicit because a split may not contain every class.
    """

    indptr: npt.NDArray[np.int64]
    indices: IntArray
    x: npt.NDArray[np.float32]
    y: npt.NDArray[np.int64]
    train_mask: npt.NDArray[np.bool_]
    val_mask: npt.NDArray[np.bool_]
    test_mask: npt.NDArray[np.bool_]
    num_classes: int
    name: str = "graph"
    info: dict[str, Any] = field(default_factory=dict)
    """Facts about how the graph was made (e.g. dropped duplicate edges), kept in META.json."""

    @classmethod
    def from_edges(
        cls,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        x: npt.ArrayLike,
        y: npt.ArrayLike,
        train_mask: npt.ArrayLike,
        val_mask: npt.ArrayLike,
        test_mask: npt.ArrayLike,
        *,
        num_classes: int | None = None,
        name: str = "graph",
    ) -> GraphData:
        """A graph from an edge list (either direction, duplicates allowed) and node arrays."""
        xa = np.asarray(x, dtype=np.float32)
        ya = np.asarray(y, dtype=np.int64)
        n = len(xa)
        indptr, indices, info = csr_from_edges(
            np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), n
        )
        graph = cls(
            indptr=indptr,
            indices=indices,
            x=xa.reshape(n, -1),
            y=ya,
            train_mask=np.asarray(train_mask, dtype=np.bool_),
            val_mask=np.asarray(val_mask, dtype=np.bool_),
            test_mask=np.asarray(test_mask, dtype=np.bool_),
            num_classes=int(num_classes if num_classes is not None else ya.max(initial=-1) + 1),
            name=name,
            info=dict(info),
        )
        graph.validate()
        return graph

    @property
    def num_nodes(self) -> int:
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        """Stored directed edges: twice the undirected edges."""
        return len(self.indices)

    @property
    def num_undirected_edges(self) -> int:
        return len(self.indices) // 2

    @property
    def num_features(self) -> int:
        return int(self.x.shape[1])

    def degrees(self) -> npt.NDArray[np.int64]:
        return np.diff(self.indptr)

    def nbytes(self) -> int:
        arrays = (self.indptr, self.indices, self.x, self.y)
        masks = (self.train_mask, self.val_mask, self.test_mask)
        return sum(a.nbytes for a in arrays + masks)

    def validate(self, *, deep: bool = False) -> None:
        """Check shapes, dtypes and ranges; ``deep`` also checks symmetry and row order (slow)."""
        n = self.num_nodes
        where = f"graph {self.name!r}"

        def fail(msg: str) -> None:
            raise DatasetError(f"{where}: {msg}")

        if self.indptr.dtype != np.int64 or self.indptr.ndim != 1 or n < 0:
            fail(f"indptr must be int64 [N+1], got {self.indptr.dtype} {self.indptr.shape}")
        if self.indices.dtype not in (np.int32, np.int64) or self.indices.ndim != 1:
            fail(f"indices must be int32 or int64 [E], got {self.indices.dtype}")
        if self.indptr[0] != 0 or self.indptr[-1] != len(self.indices):
            fail("indptr must start at 0 and end at len(indices)")
        if n > 0 and np.any(np.diff(self.indptr) < 0):
            fail("indptr must be non-decreasing")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= n):
            fail(f"indices must lie in [0, {n})")
        if self.x.dtype != np.float32 or self.x.ndim != 2 or self.x.shape[0] != n:
            fail(f"x must be float32 [{n}, F], got {self.x.dtype} {self.x.shape}")
        if self.y.dtype != np.int64 or self.y.shape != (n,):
            fail(f"y must be int64 [{n}], got {self.y.dtype} {self.y.shape}")
        if n and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            fail(f"labels must lie in [0, num_classes={self.num_classes})")
        for name in ("train_mask", "val_mask", "test_mask"):
            m = getattr(self, name)
            if m.dtype != np.bool_ or m.shape != (n,):
                fail(f"{name} must be bool [{n}], got {m.dtype} {m.shape}")
        if deep:
            src = np.repeat(np.arange(n, dtype=np.int64), self.degrees())
            dst = self.indices.astype(np.int64)
            if np.any(src == dst):
                fail("the CSR has self-loops")
            keys = src * n + dst
            if np.any(np.diff(keys) <= 0):
                fail("rows must be sorted without duplicates")
            rev = np.sort(dst * n + src)
            if not np.array_equal(rev, keys):
                fail("the CSR is not symmetric: some edge lacks its reverse")


def csr_from_edges(
    src: IntArray, dst: IntArray, num_nodes: int
) -> tuple[npt.NDArray[np.int64], IntArray, dict[str, int]]:
    """Build the undirected CSR of an edge list: both directions, no self-loops or duplicates.

    Holds one int64 key per undirected edge while it sorts, then fills ``indices`` (both
    directions, narrowest dtype): at most about twice the final CSR. Returns
    ``(indptr, indices, info)`` where ``info`` counts the dropped self-loops and duplicates.
    """
    m = len(src)
    n = np.int64(num_nodes)
    keys = np.empty(m, dtype=np.int64)
    self_loops = 0
    for a, b in chunks(m):
        s = src[a:b].astype(np.int64)
        d = dst[a:b].astype(np.int64)
        self_loops += int(np.count_nonzero(s == d))
        keys[a:b] = np.minimum(s, d) * n + np.maximum(s, d)
    kept = sort_unique_edges(keys, num_nodes)
    indptr, indices = csr_from_edge_keys(keys[:kept], num_nodes)
    info = {"self_loops_dropped": self_loops, "duplicate_edges_dropped": m - self_loops - kept}
    return indptr, indices, info


def sort_unique_edges(keys: npt.NDArray[np.int64], num_nodes: int) -> int:
    """Sort edge keys ``lo * num_nodes + hi`` in place and move the distinct ones that are
    not self-loops to the front; return their count."""
    nn = np.int64(num_nodes)
    keys.sort()
    out = 0
    prev = np.int64(-1)
    for a, b in chunks(len(keys)):
        k = keys[a:b]
        keep = np.empty(len(k), dtype=np.bool_)
        keep[0] = k[0] != prev
        np.not_equal(k[1:], k[:-1], out=keep[1:])
        keep &= (k // nn) != (k % nn)
        prev = k[-1]
        sel = k[keep]
        keys[out : out + len(sel)] = sel
        out += len(sel)
    return out


def csr_from_edge_keys(
    keys: npt.NDArray[np.int64], num_nodes: int
) -> tuple[npt.NDArray[np.int64], IntArray]:
    """The undirected CSR of sorted, distinct keys ``lo * num_nodes + hi`` (lo < hi).

    Row r lists first the ``lo`` of keys whose ``hi`` is r (all below r), then the ``hi`` of
    keys whose ``lo`` is r (all above r), so every row comes out sorted. Streams over the
    keys in chunks; the only full-size allocation is ``indices``.
    """
    n = np.int64(num_nodes)
    # Keys are sorted by lo: each row's keys to higher ids form one block.
    fwd_start = np.searchsorted(keys, np.arange(num_nodes + 1, dtype=np.int64) * n)
    fwd = np.diff(fwd_start)
    back = np.zeros(num_nodes, dtype=np.int64)  # edges to lower ids, per row
    for a, b in chunks(len(keys), 4 * EDGE_CHUNK):
        back += np.bincount(keys[a:b] % n, minlength=num_nodes)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(fwd + back, out=indptr[1:])
    del fwd
    indices = np.empty(int(indptr[-1]), dtype=index_dtype(num_nodes))
    cursor = indptr[:-1].copy()  # next free slot for a lower neighbour, per row
    for a, b in chunks(len(keys)):
        lo, hi = np.divmod(keys[a:b], n)
        # lo's row gets hi, after lo's lower neighbours, in key order.
        pos = np.arange(a, b, dtype=np.int64)
        pos -= fwd_start[lo]
        pos += indptr[lo]
        pos += back[lo]
        indices[pos] = hi
        # hi's row gets lo; keys are sorted by lo, so a stable order keeps rows sorted.
        order = np.argsort(hi, kind="stable")
        hs = hi[order]
        first = np.empty(len(hs), dtype=np.bool_)
        first[0] = True
        np.not_equal(hs[1:], hs[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        sizes = np.diff(np.append(starts, len(hs)))
        # Rank within each run of equal hi, added to that row's cursor.
        pos = np.arange(len(hs), dtype=np.int64)
        pos -= np.repeat(starts, sizes)
        pos += cursor[hs]
        indices[pos] = lo[order]
        cursor[hs[starts]] += sizes
    return indptr, indices


def edge_pairs(indptr: npt.NDArray[np.int64], indices: IntArray) -> npt.NDArray[np.int64]:
    """The directed edges of a CSR as an [E, 2] array of (src, dst); for tests and checks."""
    n = len(indptr) - 1
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return np.stack([src, indices.astype(np.int64)], axis=1)
