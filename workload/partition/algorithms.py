"""Node-to-partition assignment of typed graphs: METIS (edge-cut minimising, balanced) and
random. A homogeneous graph is the one-type case; :func:`assign` takes either.

METIS runs on the homogeneous view: the node types stacked in the graph's order (typed node
``(t, i)`` is ``offsets[t] + i``) and every edge type merged into one undirected simple graph
(both directions, no self-loops, no duplicates), as DistDGL's and GraphLearn's partitioners
do; a :class:`GraphData` is its own view. METIS gets one vertex-weight column per balance
constraint, as DistDGL's ``--balance_train --balance_edges`` does: one per node type (each
type is balanced on its own), the target type's training nodes, and the view's degree (edge
balance). METIS's balance is a soft goal, so :mod:`.balance` then moves nodes until each
constraint is within its tolerance. Views above ``METIS_MAX_EDGES`` are handed to METIS as a
uniform random subgraph, which bounds its memory (the weights, the rebalancing and the
reported cut always use the full graph). Random assignment deals each type's shuffled nodes
round-robin, so every type's partitions differ in size by at most one node; it needs no
memory beyond the assignment itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_workload.data.csr import chunks, csr_from_edge_keys, sort_unique_keys
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import NODE_TYPE, GraphData, HeteroGraphData
from distgnn_workload.partition.balance import is_balanced, rebalance

log = logging.getLogger(__name__)

Assignment = npt.NDArray[np.int32]
TypedAssignment = dict[str, Assignment]
"""Per node type: the partition of each type-local node id."""


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
    """A seeded random balanced assignment of one node type: sizes differ by at most one."""
    check_num_partitions(num_nodes, num_partitions)
    return _deal(np.random.default_rng(seed).permutation(num_nodes), num_partitions, 0)


def _deal(order: npt.NDArray[np.int64], k: int, start: int) -> Assignment:
    """Nodes ``order`` dealt round-robin to the partitions, the first to ``start``."""
    out = np.empty(len(order), dtype=np.int32)
    for a, b in chunks(len(order)):
        out[order[a:b]] = ((np.arange(a, b, dtype=np.int64) + start) % k).astype(np.int32)
    return out


def random_typed(graph: HeteroGraphData, num_partitions: int, seed: int = 0) -> TypedAssignment:
    """Each type's nodes dealt round-robin in a seeded shuffled order; every type's
    partitions differ by at most one node, and so do the totals."""
    k = num_partitions
    check_num_partitions(sum(graph.node_counts.values()), k)
    rng = np.random.default_rng(seed)
    out: TypedAssignment = {}
    start = 0  # where each type's dealing starts, so that the totals stay even
    for t, n in graph.node_counts.items():
        out[t] = _deal(rng.permutation(n), k, start)
        start = (start + n) % k
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


def type_offsets(graph: HeteroGraphData) -> dict[str, int]:
    """Where each node type starts in the homogeneous view (types in the graph's order)."""
    out: dict[str, int] = {}
    at = 0
    for t, n in graph.node_counts.items():
        out[t] = at
        at += n
    return out


def homogeneous_view(graph: HeteroGraphData) -> GraphData:
    """Every edge type merged into one undirected simple graph over the stacked node ids.

    Only what partitioning reads is real: the CSR and the train mask (the target type's
    training nodes at their offset). Features are empty, labels 0. Holds one int64 key per
    stored typed edge while it sorts.
    """
    offsets = type_offsets(graph)
    n = sum(graph.node_counts.values())
    nn = np.int64(n)
    keys = np.empty(graph.num_edges(), dtype=np.int64)
    pos = 0
    for (src_t, _, dst_t), (indptr, indices) in graph.in_csr.items():
        deg = np.diff(indptr)
        so, do = np.int64(offsets[src_t]), np.int64(offsets[dst_t])
        for a, b in chunks(len(deg), 1 << 18):
            lo, hi = int(indptr[a]), int(indptr[b])
            d = np.repeat(np.arange(a, b, dtype=np.int64), deg[a:b]) + do
            s = indices[lo:hi].astype(np.int64) + so
            keys[pos : pos + hi - lo] = np.minimum(s, d) * nn + np.maximum(s, d)
            pos += hi - lo
    kept = sort_unique_keys(keys, loops_of=n)
    indptr_h, indices_h = csr_from_edge_keys(keys[:kept], n)
    del keys
    train = np.zeros(n, dtype=np.bool_)
    t0 = offsets[graph.target_node_type]
    train[t0 : t0 + graph.num_target_nodes] = graph.train_mask
    none = np.zeros(n, dtype=np.bool_)
    return GraphData(
        indptr=indptr_h,
        indices=indices_h,
        x=np.zeros((n, 0), dtype=np.float32),
        y=np.zeros(n, dtype=np.int64),
        train_mask=train,
        val_mask=none,
        test_mask=none,
        num_classes=max(1, graph.num_classes),
        name=f"{graph.name} (homogeneous view)",
    )


def split_assignment(graph: HeteroGraphData, flat: npt.NDArray[Any]) -> TypedAssignment:
    """A homogeneous-view assignment cut back into one array per node type."""
    offsets = type_offsets(graph)
    return {
        t: np.ascontiguousarray(flat[offsets[t] : offsets[t] + n], dtype=np.int32)
        for t, n in graph.node_counts.items()
    }


def balance_weights(
    graph: HeteroGraphData,
    view: GraphData,
    *,
    balance_train_nodes: bool,
    balance_edges: bool,
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """[N, ncon] vertex weights: one column per non-empty node type (``nodes:<type>``), then
    ``train_nodes`` and ``edges`` as asked."""
    offsets = type_offsets(graph)
    names: list[str] = []
    columns: list[tuple[int, int] | npt.NDArray[Any]] = []
    for t, n in graph.node_counts.items():
        if n:
            names.append(f"nodes:{t}")
            columns.append((offsets[t], offsets[t] + n))
    if balance_train_nodes and view.train_mask.any():
        names.append("train_nodes")
        columns.append(view.train_mask)
    if balance_edges and view.num_edges:
        names.append("edges")
        columns.append(view.degrees())
    weights = np.zeros((view.num_nodes, len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        if isinstance(col, tuple):
            weights[col[0] : col[1], j] = 1
        else:
            weights[:, j] = col
    return weights, names


def tolerance_of(name: str) -> float:
    """Balance tolerance of a constraint: ``nodes:<type>`` takes the node tolerance."""
    return float(TOLERANCE["nodes" if name.startswith("nodes:") else name])


def metis_assignment(
    graph: HeteroGraphData,
    num_partitions: int,
    *,
    balance_train_nodes: bool = True,
    balance_edges: bool = True,
    seed: int = 0,
    max_metis_edges: int = METIS_MAX_EDGES,
    view: GraphData | None = None,
) -> TypedAssignment:
    """METIS k-way on the homogeneous view (``view``, or built), balanced per node type, on
    the target type's training nodes and on edges, then rebalanced within each constraint's
    tolerance."""
    n, k = sum(graph.node_counts.values()), num_partitions
    check_num_partitions(n, k)
    if k == 1:
        return {t: np.zeros(c, dtype=np.int32) for t, c in graph.node_counts.items()}
    if view is None:
        view = homogeneous_view(graph)
        log.info(
            "homogeneous view of %s: %d nodes, %d undirected edges",
            graph.name,
            view.num_nodes,
            view.num_undirected_edges,
        )
    weights, names = balance_weights(
        graph, view, balance_train_nodes=balance_train_nodes, balance_edges=balance_edges
    )
    flat = metis_with_weights(
        view,
        k,
        weights,
        names,
        [tolerance_of(name) for name in names],
        seed=seed,
        max_metis_edges=max_metis_edges,
    )
    return split_assignment(graph, flat)


@overload
def assign(graph: GraphData, num_partitions: int, spec: PartitionSpec) -> Assignment: ...
@overload
def assign(graph: HeteroGraphData, num_partitions: int, spec: PartitionSpec) -> TypedAssignment: ...
def assign(
    graph: GraphData | HeteroGraphData, num_partitions: int, spec: PartitionSpec
) -> Assignment | TypedAssignment:
    """The partition of each node, by the spec's algorithm: per node type for a typed graph,
    one array for a homogeneous one (its one type's; it is its own homogeneous view)."""
    one_type = isinstance(graph, GraphData)
    typed = graph.typed() if isinstance(graph, GraphData) else graph
    if spec.algorithm == PartitionAlgorithm.random:
        parts = random_typed(typed, num_partitions, spec.seed)
    else:
        parts = metis_assignment(
            typed,
            num_partitions,
            balance_train_nodes=spec.balance_train_nodes,
            balance_edges=spec.balance_edges,
            seed=spec.seed,
            view=graph if isinstance(graph, GraphData) else None,
        )
    return parts[NODE_TYPE] if one_type else parts


def check_assignment(graph: HeteroGraphData, assignment: TypedAssignment, k: int) -> None:
    """Every node type has one partition in [0, k) per node."""
    if set(assignment) != set(graph.node_counts):
        raise ValueError(
            f"assignment covers node types {sorted(assignment)}, the graph has "
            f"{sorted(graph.node_counts)}"
        )
    for t, n in graph.node_counts.items():
        a = assignment[t]
        if a.shape != (n,):
            raise ValueError(f"assignment[{t!r}] must have shape ({n},), got {a.shape}")
        if n and (int(a.min()) < 0 or int(a.max()) >= k):
            raise ValueError(f"assignment[{t!r}] values must lie in [0, {k})")
