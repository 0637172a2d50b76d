"""METIS out of core: METIS partitions a sample of the graph, and the other nodes are streamed
into the partitions their neighbours are in.

1. **Sample.** Each node is kept with probability ``q = min(1, sqrt(target / E))`` (seeded),
   so the subgraph induced on the sample holds about ``q² E ≈ target`` stored edges
   (``partition.metisSampleEdges``). One pass over the edge chunks collects it.
2. **METIS** k-way on the sample, balancing its nodes.
3. **Projection and refinement.** :data:`ROUNDS` more passes over the edge chunks. In each,
   every node draws the partitions of :data:`DRAWS` neighbours, each chosen uniformly among
   its assigned neighbours (a reservoir draw: the occurrence with the largest random key),
   and counts its neighbours in its own partition and in each partition it drew in the pass
   before. After the first pass every unassigned node takes its first draw (a random
   neighbour's partition: the majority one with probability the majority's share); after
   each later pass a node moves to the better of its previous draws when more of its
   neighbours are there (highest gain first, within the balance capacity, a random
   :data:`MOVE_SHARE` of the candidates each round so that neighbours do not swap past each
   other).
4. **Balance.** Partitions never exceed ``(1 + NODE_TOLERANCE)`` times the mean node count:
   moves into a full partition are refused, nodes that cannot join their draw and nodes with
   no assigned neighbour go to the partitions with room, and a partition the METIS sample
   left over capacity sheds the nodes with the fewest neighbours at home.

Memory: ten node-sized 4-byte arrays (the partition, two draws and their keys, the previous
pass's two draws, three counts) and the node sample's ids, one chunk of edges in both
directions, and METIS on the sample (about 138 bytes per stored sample edge, measured:
``distgnn_api.partition_cost``). Only the node count is balanced; train
nodes and edges follow the nodes (META.json's ``balance`` reports all three).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from distgnn_workload.data.csr import csr_from_edges
from distgnn_workload.data.stream import StreamedGraph
from distgnn_workload.partition.algorithms import TOLERANCE, check_num_partitions
from distgnn_workload.partition.metis import Assignment, _metis

log = logging.getLogger(__name__)

ROUNDS = 4
"""Passes over the edges after the sample's: the first assigns, the others refine."""
NODE_TOLERANCE = TOLERANCE["nodes"]
"""Largest partition over the mean node count (3%, as in memory)."""

MOVE_SHARE = 0.75
"""Share of the nodes with a gain that may move in a round: the others wait, so that
neighbours do not swap past each other."""
ADMIT_ROUNDS = 4
"""Admissions per round: the moves admitted in one free room for the next."""

ProgressFn = Callable[[float], None]


def sample_share(num_stored_edges: int, target_edges: int) -> float:
    """The node sampling probability whose induced subgraph holds about ``target_edges``."""
    if num_stored_edges <= target_edges:
        return 1.0
    return math.sqrt(target_edges / num_stored_edges)


def _admit(
    targets: npt.NDArray[np.int32], priority: npt.NDArray[Any], room: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Which moves fit: per target partition, the highest-priority ones up to its room."""
    k = len(room)
    order = np.lexsort((-priority, targets))
    ordered = targets[order]
    first = np.searchsorted(ordered, np.arange(k))
    rank = np.arange(len(order)) - first[ordered]
    ok = np.zeros(len(targets), dtype=np.bool_)
    ok[order] = rank < room[ordered]
    return ok


def _fill(
    parts: Assignment, nodes: npt.NDArray[np.int64], room: npt.NDArray[np.int64], rng: Any
) -> None:
    """Deal ``nodes`` (shuffled) to the partitions with room, filling each in turn."""
    slots = np.repeat(np.arange(len(room), dtype=np.int32), np.maximum(room, 0))
    if len(slots) < len(nodes):  # cannot happen: the capacities cover every node
        raise AssertionError("partition capacities do not cover the graph")
    parts[rng.permutation(nodes)] = rng.permutation(slots)[: len(nodes)]


DRAWS = 2
"""Random-neighbour draws per node and pass: each is weighed in the next pass."""


def _count(counts: npt.NDArray[np.int32], nodes: npt.NDArray[np.int64]) -> None:
    """``counts[i] += 1`` for every occurrence of ``i`` in ``nodes`` (np.add.at's fast path
    needs values of the array's dtype)."""
    np.add.at(counts, nodes, np.ones(len(nodes), dtype=np.int32))


class _Pass:
    """One streamed pass: each node's :data:`DRAWS` random-neighbour draws, and its
    neighbour counts in its own partition and in each of ``previous`` (the draws of the pass
    before)."""

    def __init__(self, parts: Assignment, previous: list[npt.NDArray[np.int32]], seed: int):
        n = len(parts)
        self.parts, self.previous = parts, previous
        self.draws = [np.full(n, -1, dtype=np.int32) for _ in range(DRAWS)]
        self.keys = [np.full(n, -1.0, dtype=np.float32) for _ in range(DRAWS)]
        self.home = np.zeros(n, dtype=np.int32)
        self.there = [np.zeros(n, dtype=np.int32) for _ in previous]
        self.rng = np.random.default_rng(seed)
        self.known_edges = 0
        self.home_edges = 0

    def add(self, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64]) -> None:
        u = np.concatenate([src, dst])
        v = np.concatenate([dst, src])
        pv = self.parts[v]
        keep = (pv >= 0) & (u != v)
        u, pv = u[keep], pv[keep]
        del v, keep
        for draw, key in zip(self.draws, self.keys, strict=True):
            r = self.rng.random(len(u), dtype=np.float32)
            np.maximum.at(key, u, r)
            won = r == key[u]
            draw[u[won]] = pv[won]
        pu = self.parts[u]
        home = u[pv == pu]
        _count(self.home, home)
        self.known_edges += int(np.count_nonzero(pu >= 0))
        self.home_edges += len(home)
        for prev, there in zip(self.previous, self.there, strict=True):
            _count(there, u[pv == prev[u]])


def sampled_metis_assignment(
    graph: StreamedGraph,
    num_partitions: int,
    *,
    sample_edges: int,
    seed: int = 0,
    rounds: int = ROUNDS,
    progress: ProgressFn | None = None,
) -> tuple[Assignment, dict[str, Any]]:
    """The partition of every node of ``graph``, and what META.json records of how."""
    n, k = graph.num_nodes, num_partitions
    check_num_partitions(n, k)
    if rounds < 1:
        raise ValueError("rounds must be at least 1: the first pass assigns the unsampled nodes")
    report = progress or (lambda _: None)
    rng = np.random.default_rng(seed)
    if k == 1:
        return np.zeros(n, dtype=np.int32), {"method": "single partition"}
    t = time.perf_counter()
    share = sample_share(2 * graph.edge_pairs_hint, sample_edges)
    sample = np.flatnonzero(rng.random(n) < share) if share < 1 else np.arange(n)
    if len(sample) < k:
        sample = np.sort(rng.choice(n, size=k, replace=False))
    parts = np.full(n, -1, dtype=np.int32)
    parts[sample] = _metis_on_sample(graph, sample, k, seed)
    sample_s = time.perf_counter() - t
    report(1 / (rounds + 1))
    cap = max(math.ceil(n / k), math.floor((1 + NODE_TOLERANCE) * n / k))
    record: dict[str, Any] = {
        "method": "metis on a node sample, streamed neighbour refinement",
        "sample_nodes": len(sample),
        "sample_share": share,
        "sample_seconds": round(sample_s, 3),
        "node_capacity": cap,
        "rounds": [],
    }
    del sample
    previous: list[npt.NDArray[np.int32]] = []
    home = np.zeros(n, dtype=np.int32)
    for r in range(rounds):
        t = time.perf_counter()
        p = _Pass(parts, previous, seed + 1 + r)
        for src, dst in graph.edges():
            p.add(src, dst)
        load = np.bincount(parts[parts >= 0], minlength=k).astype(np.int64)
        if r == 0:
            moved = _assign_unassigned(parts, p.draws[0], load, cap, rng)
        else:
            moved = _move(parts, previous, p.home, p.there, load, cap, rng)
        cut = 1 - p.home_edges / p.known_edges if p.known_edges else 0.0
        record["rounds"].append(
            {
                "moved": moved,
                "cut_before": round(cut, 5),
                "seconds": round(time.perf_counter() - t, 3),
            }
        )
        log.info("out-of-core METIS round %d: cut %.4f before it, %d nodes moved", r, cut, moved)
        previous = p.draws if r else p.draws[1:]
        home = p.home
        del p
        report((r + 2) / (rounds + 1))
    record["rebalanced"] = _shed(parts, home, k, cap, rng)
    return parts, record


def _metis_on_sample(
    graph: StreamedGraph, sample: npt.NDArray[np.int64], k: int, seed: int
) -> Assignment:
    """METIS k-way of the subgraph induced on ``sample`` (sorted node ids)."""
    inside = np.zeros(graph.num_nodes, dtype=np.bool_)
    inside[sample] = True
    src_parts: list[npt.NDArray[np.int64]] = []
    dst_parts: list[npt.NDArray[np.int64]] = []
    for src, dst in graph.edges():
        keep = inside[src] & inside[dst]
        src_parts.append(np.searchsorted(sample, src[keep]))
        dst_parts.append(np.searchsorted(sample, dst[keep]))
    del inside
    s = len(sample)
    xadj, adjncy, _ = csr_from_edges(
        np.concatenate(src_parts) if src_parts else np.zeros(0, np.int64),
        np.concatenate(dst_parts) if dst_parts else np.zeros(0, np.int64),
        s,
    )
    del src_parts, dst_parts
    t = time.perf_counter()
    found = _metis(xadj, adjncy.astype(np.int64), k, np.ones((s, 1), dtype=np.int64), seed)
    log.info(
        "METIS k-way of a %d-node sample (%d stored edges) into %d parts: %.1f s",
        s,
        len(adjncy),
        k,
        time.perf_counter() - t,
    )
    return found


def _assign_unassigned(
    parts: Assignment, draw: npt.NDArray[np.int32], load: npt.NDArray[np.int64], cap: int, rng: Any
) -> int:
    """Give every unassigned node its draw where there is room, the rest to partitions with
    room; returns how many were assigned."""
    todo = np.flatnonzero(parts < 0)
    targets = draw[todo]
    has = targets >= 0
    ok = np.zeros(len(todo), dtype=np.bool_)
    ok[has] = _admit(targets[has], rng.random(int(has.sum())), cap - load)
    parts[todo[ok]] = targets[ok]
    load += np.bincount(targets[ok], minlength=len(load))
    _fill(parts, todo[~ok], cap - load, rng)
    return len(todo)


def _move(
    parts: Assignment,
    previous: list[npt.NDArray[np.int32]],
    home: npt.NDArray[np.int32],
    there: list[npt.NDArray[np.int32]],
    load: npt.NDArray[np.int64],
    cap: int,
    rng: Any,
) -> int:
    """Move the nodes with more neighbours in one of their previous draws than at home to
    the better draw, highest gain first, as long as the partitions have room (departures
    make room for the next admissions); returns how many moved."""
    best = previous[0].copy()
    gain = there[0].astype(np.int64) - home
    for prev, count in zip(previous[1:], there[1:], strict=True):
        g = count.astype(np.int64) - home
        better = g > gain
        best[better] = prev[better]
        gain[better] = g[better]
    cand = np.flatnonzero((gain > 0) & (best >= 0) & (best != parts))
    cand = cand[rng.random(len(cand)) < MOVE_SHARE]
    moved = 0
    for _ in range(ADMIT_ROUNDS):
        if not len(cand):
            break
        ok = _admit(best[cand], gain[cand], cap - load)
        if not ok.any():
            break
        go = cand[ok]
        np.subtract.at(load, parts[go], 1)
        np.add.at(load, best[go], 1)
        parts[go] = best[go]
        moved += len(go)
        cand = cand[~ok]
    return moved


def _shed(parts: Assignment, home: npt.NDArray[np.int32], k: int, cap: int, rng: Any) -> int:
    """Move nodes out of partitions over ``cap`` (those with the fewest neighbours at home)
    into partitions with room; returns how many moved."""
    load = np.bincount(parts, minlength=k).astype(np.int64)
    moved: list[npt.NDArray[np.int64]] = []
    for q in np.flatnonzero(load > cap):
        members = np.flatnonzero(parts == q)
        order = np.argsort(home[members], kind="stable")
        moved.append(members[order[: int(load[q] - cap)]])
        load[q] = cap
    if not moved:
        return 0
    out = np.concatenate(moved)
    _fill(parts, out, cap - load, rng)
    return len(out)
