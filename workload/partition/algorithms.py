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
reported cut always use the full graph). METIS itself, its input and the rebalancing are
:mod:`.metis`; this module builds the view and the weights and cuts the view's assignment
back into node types. Random assignment deals each type's shuffled nodes round-robin, so
every type's partitions differ in size by at most one node; it needs no memory beyond the
assignment itself.
"""

from __future__ import annotations

import logging
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from distgnn_api.spec import PartitionAlgorithm, PartitionSpec
from distgnn_workload.data.csr import chunks, csr_from_edge_keys, sort_unique_keys
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import NODE_TYPE, GraphData, HeteroGraphData
from distgnn_workload.partition.metis import METIS_MAX_EDGES, metis_with_weights
from distgnn_workload.partition.metis import Assignment as Assignment

log = logging.getLogger(__name__)

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
