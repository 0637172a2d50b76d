"""Edge lists into CSRs: the undirected CSR of a homogeneous graph, and the
destination-indexed CSRs of a typed graph's relations (reverse relations added as PyG's
``ToUndirected`` adds them). One chunked sort-and-deduplicate serves both.

Edges are sorted as int64 keys in bounded chunks, so that a relation of hundreds of millions
of edges needs its keys and little more. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.edge_types import EdgeType, edge_type_key, reverse_edge_type
from distgnn_workload.data.errors import DatasetError

# Elements handled per vectorised step when streaming over edges: bounds temporaries to
# a few tens of MB each, whatever the graph's size.
EDGE_CHUNK = 1 << 20

IntArray = npt.NDArray[np.integer[Any]]
CSR = tuple[npt.NDArray[np.int64], IntArray]
"""``(indptr int64 [num_rows + 1], indices [E])``; a typed graph's is destination-indexed:
row ``d`` lists the source ids whose messages reach ``d``."""
EdgeList = tuple[npt.ArrayLike, npt.ArrayLike]
"""``(src ids, dst ids)`` of one relation, in any order, duplicates allowed."""


def index_dtype(num_nodes: int) -> np.dtype[Any]:
    """The narrowest dtype that stores node ids of a graph: int32 below 2^31 nodes."""
    return np.dtype(np.int32) if num_nodes <= np.iinfo(np.int32).max else np.dtype(np.int64)


def chunks(total: int, size: int = EDGE_CHUNK) -> Iterator[tuple[int, int]]:
    """Consecutive [start, end) ranges covering [0, total)."""
    for start in range(0, total, size):
        yield start, min(start + size, total)


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
    kept = sort_unique_keys(keys, loops_of=num_nodes)
    indptr, indices = csr_from_edge_keys(keys[:kept], num_nodes)
    info = {"self_loops_dropped": self_loops, "duplicate_edges_dropped": m - self_loops - kept}
    return indptr, indices, info


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


def relation_key(edge_type: EdgeType) -> str:
    try:
        return edge_type_key(edge_type)
    except ValueError as err:
        raise DatasetError(str(err)) from None


def typed_csr_from_edges(
    edges: Mapping[EdgeType, EdgeList],
    node_counts: Mapping[str, int],
    *,
    add_reverse: bool = True,
) -> tuple[dict[EdgeType, CSR], dict[str, Any]]:
    """Destination-indexed CSRs of per-relation edge lists, reverse relations added.

    With ``add_reverse``, a relation within one type holds both directions of each edge, and
    a relation between two types gets its reverse (``rev_<rel>``); where the input already
    holds a relation and its reverse (a graph saved after ``ToUndirected``), both come out as
    the union of the two, each the other's reverse. Ids are checked against the node counts.
    Returns ``(in_csr, info)``; edge types keep the input's order, each reverse added after
    all given ones. ``info`` counts duplicates dropped and self-loops kept, per relation key.
    """
    given = list(edges)
    for et in given:
        key = relation_key(et)
        for t in (et[0], et[2]):
            if t not in node_counts:
                raise DatasetError(
                    f"edge type {key} names node type {t!r}, which is not one of "
                    f"{', '.join(node_counts) or '(none)'}"
                )
    out: dict[EdgeType, CSR] = {}
    duplicates: dict[str, int] = {}
    self_loops: dict[str, int] = {}
    added: list[str] = []
    done: set[EdgeType] = set()
    for et in given:
        if et in done:
            continue
        src, _, dst = et
        ns, nd = node_counts[src], node_counts[dst]
        rev = reverse_edge_type(et)
        parts: list[tuple[EdgeType, bool]] = [(et, False)]
        if add_reverse and rev != et and rev in edges:
            parts.append((rev, True))
        both = add_reverse and rev == et
        keys = _edge_keys(edges, parts, node_counts, both=both)
        given_edges = len(keys) // 2 if both else len(keys)
        kept = sort_unique_keys(keys)
        keys = keys[:kept]
        loops = _loops(keys, ns) if src == dst else 0
        # Within one type each distinct edge is stored twice, a self-loop once.
        distinct = (kept + loops) // 2 if both else kept
        duplicates[relation_key(et)] = given_edges - distinct
        if src == dst:
            self_loops[relation_key(et)] = loops
        out[et] = _csr_from_sorted_keys(keys, nd, ns)
        done.add(et)
        if add_reverse and rev != et:
            # Swap the key's roles in place: dst * ns + src -> src * nd + dst.
            for a, b in chunks(len(keys)):
                d, s = np.divmod(keys[a:b], np.int64(ns))
                s *= nd
                s += d
                keys[a:b] = s
            keys.sort()
            if rev not in edges:
                added.append(relation_key(rev))
            out[rev] = _csr_from_sorted_keys(keys, ns, nd)
            done.add(rev)
        del keys
    # The given types in their order, then the reverses added.
    out = {et: out[et] for et in [*given, *(r for r in out if r not in edges)]}
    info: dict[str, Any] = {
        "duplicate_edges_dropped": duplicates,
        "self_loops": self_loops,
        "reverse_edge_types_added": added,
    }
    return out, info


def _edge_keys(
    edges: Mapping[EdgeType, EdgeList],
    parts: list[tuple[EdgeType, bool]],
    node_counts: Mapping[str, int],
    *,
    both: bool,
) -> npt.NDArray[np.int64]:
    """Keys ``dst * num_src + src`` of the edges of ``parts`` (flipped where marked), ids
    checked; ``both`` also adds every edge's other direction (a relation within one type)."""
    arrays = []
    for et, flipped in parts:
        s_ids, d_ids = (_ids(a, et) for a in edges[et])
        if len(s_ids) != len(d_ids):
            raise DatasetError(
                f"edge type {relation_key(et)} has {len(s_ids)} source ids but {len(d_ids)} "
                "destination ids; give one of each per edge"
            )
        _check_ids(et, s_ids, node_counts[et[0]], "source")
        _check_ids(et, d_ids, node_counts[et[2]], "destination")
        arrays.append((d_ids, s_ids) if flipped else (s_ids, d_ids))
    first = parts[0][0]
    ns = np.int64(node_counts[first[0]])
    m = sum(len(s) for s, _ in arrays)
    keys = np.empty(2 * m if both else m, dtype=np.int64)
    pos = 0
    for s_ids, d_ids in arrays:
        for a, b in chunks(len(s_ids)):
            s = s_ids[a:b].astype(np.int64)
            d = d_ids[a:b].astype(np.int64)
            np.multiply(d, ns, out=keys[pos : pos + b - a])
            keys[pos : pos + b - a] += s
            if both:
                np.multiply(s, ns, out=keys[m + pos : m + pos + b - a])
                keys[m + pos : m + pos + b - a] += d
            pos += b - a
    return keys


def _ids(value: npt.ArrayLike, et: EdgeType) -> npt.NDArray[Any]:
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise DatasetError(
            f"edge type {relation_key(et)}: node ids must be integers, got {arr.dtype}"
        )
    return arr.reshape(-1)


def _check_ids(et: EdgeType, ids: npt.NDArray[Any], n: int, role: str) -> None:
    node_type = et[0] if role == "source" else et[2]
    for a, b in chunks(len(ids), 4 * EDGE_CHUNK):
        block = ids[a:b]
        bad = (block < 0) | (block >= n)
        if bad.any():
            i = a + int(np.flatnonzero(bad)[0])
            raise DatasetError(
                f"edge type {relation_key(et)}: edge {i} has {role} id {int(ids[i])} outside [0, {n}) "
                f"({node_type} has {n} nodes)"
            )


def _loops(keys: npt.NDArray[np.int64], n: int) -> int:
    """Self-loops among keys ``dst * n + src`` of a relation within one type."""
    count = 0
    for a, b in chunks(len(keys)):
        d, s = np.divmod(keys[a:b], np.int64(n))
        count += int(np.count_nonzero(d == s))
    return count


def sort_unique_keys(keys: npt.NDArray[np.int64], *, loops_of: int | None = None) -> int:
    """Sort ``keys`` in place and move the distinct ones to the front; return their count.

    With ``loops_of=n``, keys are edges ``a * n + b`` and self-loops (``a == b``) are dropped
    too (the undirected builder's rule; the typed one keeps them)."""
    keys.sort()
    out = 0
    prev = np.int64(-1)
    for a, b in chunks(len(keys)):
        k = keys[a:b]
        keep = np.empty(len(k), dtype=np.bool_)
        keep[0] = k[0] != prev
        np.not_equal(k[1:], k[:-1], out=keep[1:])
        if loops_of is not None:
            nn = np.int64(loops_of)
            keep &= (k // nn) != (k % nn)
        prev = k[-1]
        sel = k[keep]
        keys[out : out + len(sel)] = sel
        out += len(sel)
    return out


def _csr_from_sorted_keys(keys: npt.NDArray[np.int64], num_rows: int, num_cols: int) -> CSR:
    """The CSR of sorted, distinct keys ``row * num_cols + col``; columns narrowest dtype."""
    counts = np.zeros(num_rows, dtype=np.int64)
    for a, b in chunks(len(keys), 4 * EDGE_CHUNK):
        counts += np.bincount(keys[a:b] // np.int64(num_cols), minlength=num_rows)
    indptr = np.zeros(num_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(len(keys), dtype=index_dtype(num_cols))
    for a, b in chunks(len(keys)):
        indices[a:b] = keys[a:b] % np.int64(num_cols)
    return indptr, indices
