"""Node-to-partition assignment: METIS (edge-cut minimising, balanced) and random.

METIS gets one vertex-weight column per balance constraint, as DistDGL's
``--balance_train --balance_edges`` does: every node weighs 1 (node balance), training
nodes weigh 1 in a second column (train balance), and a node's degree is a third column
(edge balance). METIS's balance is a soft goal, so :mod:`.balance` then moves nodes until
each constraint is within its tolerance. Graphs above ``METIS_MAX_EDGES`` are handed to
METIS as a uniform random subgraph, which bounds its memory (the weights, the rebalancing
and the reported cut always use the full graph). Random assignment deals a shuffled node order
round-robin, so partitions differ in size by at most one node; it needs no memory beyond
the assignment itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_workload.data.csr import chunks
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition.balance import is_balanced, rebalance

log = logging.getLogger(__name__)

Assignment = npt.NDArray[np.int32]


def check_num_partitions(num_nodes: int, num_partitions: int) -> None:
    """Refuse partition counts the graph cannot fill."""
    if num_partitions < 1:
        raise DatasetError(
            f"numPartitions={num_partitions}: need at least 1", source="spec.partition"
        )
    if num_partitions > num_nodes:
        raise DatasetError(
            f"numPartitions={num_partitions} exceeds the graph's {num_nodes} nodes: every "
            "partition needs at least one node; lower spec.partition.numPartitions "
            "(or the sampler/trainer replicas it defaults to)",
            source="spec.partition",
        )


def random_assignment(num_nodes: int, num_partitions: int, seed: int = 0) -> Assignment:
    """A seeded random balanced assignment: sizes differ by at most one."""
    check_num_partitions(num_nodes, num_partitions)
    order = np.random.default_rng(seed).permutation(num_nodes)
    out = np.empty(num_nodes, dtype=np.int32)
    for a, b in chunks(num_nodes):
        out[order[a:b]] = (np.arange(a, b, dtype=np.int64) % num_partitions).astype(np.int32)
    return out


# Per-constraint balance tolerance after rebalancing: nodes and train nodes within 3% of
# the mean (METIS's default ufactor); edges within 10%, since each further point of edge
# balance costs cut edges.
TOLERANCE = {"nodes": 0.03, "train_nodes": 0.03, "edges": 0.10}

# METIS (64-bit build) needs about 85 bytes per stored edge and time to match: past this
# many stored edges it partitions a uniform random subgraph of this size instead. Its cut
# on the full graph is barely worse on graphs with community structure (about 1% at half
# the edges on the synthetic products-like graph), at half the memory and time.
METIS_MAX_EDGES = 64_000_000

# Below this many stored edges METIS is cheap, and a nodes-only run is tried beside the
# multi-constraint one: on small graphs METIS often balances several constraints badly,
# and rebalancing then costs more cut than starting from the nodes-only partition.
SECOND_TRY_MAX_EDGES = 20_000_000


def balance_weights(
    graph: GraphData, *, balance_train_nodes: bool, balance_edges: bool
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The [N, ncon] vertex weights to balance, and the constraint names."""
    columns: list[npt.NDArray[Any]] = [np.ones(graph.num_nodes, dtype=np.int64)]
    names = ["nodes"]
    if balance_train_nodes and graph.train_mask.any():
        columns.append(graph.train_mask)
        names.append("train_nodes")
    if balance_edges and graph.num_edges:
        columns.append(graph.degrees())
        names.append("edges")
    weights = np.empty((graph.num_nodes, len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        weights[:, j] = col
    return weights, names


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


def metis_assignment(
    graph: GraphData,
    num_partitions: int,
    *,
    balance_train_nodes: bool = True,
    balance_edges: bool = True,
    seed: int = 0,
    max_metis_edges: int = METIS_MAX_EDGES,
) -> Assignment:
    """METIS k-way with multi-constraint vertex weights (nodes, train nodes, edges), then
    :func:`rebalance` to hold every constraint within its ``TOLERANCE``."""
    n, k = graph.num_nodes, num_partitions
    check_num_partitions(n, k)
    if k == 1:
        return np.zeros(n, dtype=np.int32)
    weights, names = balance_weights(
        graph, balance_train_nodes=balance_train_nodes, balance_edges=balance_edges
    )
    tolerance = [TOLERANCE[name] for name in names]
    return metis_with_weights(
        graph, k, weights, names, tolerance, seed=seed, max_metis_edges=max_metis_edges
    )


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


def assign(graph: GraphData, num_partitions: int, spec: PartitionSpec) -> Assignment:
    """The partition of each node, by the spec's algorithm."""
    if spec.algorithm == PartitionAlgorithm.random:
        check_num_partitions(graph.num_nodes, num_partitions)
        return random_assignment(graph.num_nodes, num_partitions, spec.seed)
    return metis_assignment(
        graph,
        num_partitions,
        balance_train_nodes=spec.balance_train_nodes,
        balance_edges=spec.balance_edges,
        seed=spec.seed,
    )
