"""METIS k-way on one graph: the edge-cut minimising, balanced assignment behind
:func:`.algorithms.assign`.

:func:`metis_with_weights` partitions a :class:`GraphData`, a typed graph's homogeneous view
(:func:`.algorithms.homogeneous_view`; a one-type graph is its own view), balancing one
vertex-weight column per constraint. METIS's balance is a soft goal, so :mod:`.balance` then
moves nodes until each constraint is within its tolerance. Graphs above ``METIS_MAX_EDGES``
stored edges are handed to METIS as a uniform random subgraph (:func:`metis_input`), which
bounds its memory (the weights, the rebalancing and the reported cut always use the full
graph); below ``SECOND_TRY_MAX_EDGES`` a nodes-only run is tried beside the multi-constraint
one, and the one kept is the balanced one if only one is, else the one of lower cut.
pymetis is imported only when METIS runs.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csr import chunks
from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition.balance import is_balanced, rebalance

log = logging.getLogger(__name__)

Assignment = npt.NDArray[np.int32]
"""The partition of each node (of one graph, or of one node type)."""


# METIS (64-bit build) needs about 85 bytes per stored edge and time to match: past this
# many stored edges it partitions a uniform random subgraph of this size instead. Its cut
# on the full graph is barely worse on graphs with community structure (about 1% at half
# the edges on the synthetic products-like graph), at half the memory and time.
METIS_MAX_EDGES = 64_000_000

# Below this many stored edges METIS is cheap, and a nodes-only run is tried beside the
# multi-constraint one: on small graphs METIS often balances several constraints badly,
# and rebalancing then costs more cut than starting from the nodes-only partition.
SECOND_TRY_MAX_EDGES = 20_000_000


def edge_cut(graph: GraphData, parts: npt.NDArray[Any]) -> int:
    """Undirected edges whose endpoints are in different partitions."""
    cut = 0
    degrees = graph.degrees()
    for a, b in chunks(graph.num_nodes, 1 << 18):
        rows = np.repeat(parts[a:b], degrees[a:b])
        cut += int(
            np.count_nonzero(rows != parts[graph.indices[graph.indptr[a] : graph.indptr[b]]])
        )
    return cut // 2


def _mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser: a well-mixed 64-bit hash of each value (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def metis_input(
    graph: GraphData, max_edges: int, seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], float]:
    """The CSR handed to METIS (64-bit ids, as pymetis's METIS is built), and the share of
    edges it keeps: all of them up to ``max_edges`` stored edges, else a uniform random
    subgraph of about ``max_edges``. Each undirected edge is kept or dropped by a seeded
    hash of its endpoints, so both of its directions agree."""
    n, e = graph.num_nodes, graph.num_edges
    if e <= max_edges:
        return graph.indptr, graph.indices.astype(np.int64), 1.0
    keep_share = max_edges / e
    threshold = np.uint64(min(int(keep_share * 2.0**64), 2**64 - 1))
    salt = _mix64(np.array([seed], dtype=np.uint64))[0]
    counts = np.zeros(n, dtype=np.int64)
    kept: list[npt.NDArray[np.int64]] = []
    degrees = graph.degrees()
    for a, b in chunks(n, 1 << 16):
        lo_e, hi_e = int(graph.indptr[a]), int(graph.indptr[b])
        src = np.repeat(np.arange(a, b, dtype=np.uint64), degrees[a:b])
        dst = graph.indices[lo_e:hi_e].astype(np.uint64)
        key = np.minimum(src, dst) * np.uint64(n) + np.maximum(src, dst)
        keep = _mix64(key ^ salt) < threshold
        counts[a:b] = np.bincount((src[keep] - np.uint64(a)).astype(np.int64), minlength=b - a)
        kept.append(dst[keep].astype(np.int64))
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=xadj[1:])
    adjncy = np.concatenate(kept) if kept else np.zeros(0, dtype=np.int64)
    return xadj, adjncy, len(adjncy) / e if e else 1.0


def _metis(
    xadj: npt.NDArray[np.int64],
    adjncy: npt.NDArray[np.int64],
    k: int,
    weights: npt.NDArray[np.int64],
    seed: int,
) -> Assignment:
    import pymetis  # only this algorithm needs it

    result = pymetis.part_graph(
        k,
        pymetis.CSRAdjacency(xadj, adjncy),
        vweights=weights.reshape(-1) if weights.shape[1] > 1 else None,
        recursive=False,
        options=pymetis.Options(seed=seed),
    )
    parts = np.asarray(result.vertex_part).astype(np.int32)
    return fill_empty_partitions(parts, k)


def metis_with_weights(
    graph: GraphData,
    num_partitions: int,
    weights: npt.NDArray[np.int64],
    names: list[str],
    tolerance: list[float],
    *,
    seed: int = 0,
    max_metis_edges: int = METIS_MAX_EDGES,
) -> Assignment:
    """METIS k-way balancing the [N, ncon] ``weights`` (constraint ``names``, first the one a
    nodes-only second try keeps), then :func:`rebalance` within ``tolerance``."""
    k = num_partitions
    if k == 1:
        return np.zeros(graph.num_nodes, dtype=np.int32)
    xadj, adjncy, kept = metis_input(graph, max_metis_edges, seed)
    if kept < 1.0:
        log.info("METIS sees a random %.0f%% of the edges (of %d)", 100 * kept, graph.num_edges)
    tries = [weights]
    if weights.shape[1] > 1 and graph.num_edges <= SECOND_TRY_MAX_EDGES:
        tries.append(weights[:, :1])
    found = []
    for w in tries:
        t = time.perf_counter()
        found.append(_metis(xadj, adjncy, k, w, seed))
        log.info(
            "METIS k-way into %d parts balancing %s: %.1f s",
            k,
            ", ".join(names[: w.shape[1]]),
            time.perf_counter() - t,
        )
    del xadj, adjncy
    best: tuple[bool, int, Assignment] | None = None
    for parts in found:
        t = time.perf_counter()
        parts = rebalance(graph.indptr, graph.indices, parts, weights, k, tolerance=tolerance)
        unbalanced = not is_balanced(parts, weights, k, tolerance)
        cut = edge_cut(graph, parts) if len(found) > 1 else 0
        log.info("rebalanced to %s in %.1f s", ", ".join(names), time.perf_counter() - t)
        if best is None or (unbalanced, cut) < best[:2]:
            best = (unbalanced, cut, parts)
    assert best is not None
    return best[2]


def fill_empty_partitions(parts: Assignment, num_partitions: int) -> Assignment:
    """Move one node from the largest partition into each empty one (METIS can leave some
    empty on tiny graphs); every partition then owns at least one node."""
    counts = np.bincount(parts, minlength=num_partitions)
    for p in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        node = int(np.flatnonzero(parts == donor)[-1])
        parts[node] = p
        counts[donor] -= 1
        counts[p] += 1
        log.warning("partition %d was empty; moved node %d into it from %d", p, node, donor)
    return parts
