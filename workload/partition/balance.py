"""Greedy rebalancing of a partition under several vertex-weight constraints.

METIS treats balance as a soft goal when it has several constraints: on skewed graphs its
partitions are often 5-30% over the mean on nodes, train nodes or edges. This pass
restores balance cheaply. It takes the most overloaded (partition p, constraint c) and the
partition q lightest on c, and evens out p and q on *every* constraint at once: nodes of
both are ranked by cut gain (neighbours on the other side minus neighbours at home) and
accepted greedily, in both directions, whenever the move brings the pair's weight vectors
closer. Two-way moves let it shift e.g. edges without shifting nodes. Evening out a pair
never raises the largest load, so the rounds converge.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

DEFAULT_TOLERANCE = 0.03
"""Allowed excess of the largest partition over the mean, per constraint (METIS's default)."""


def loads(parts: npt.NDArray[Any], weights: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
    """[k, ncon] summed weights of each partition."""
    out = np.zeros((k, weights.shape[1]), dtype=np.int64)
    for c in range(weights.shape[1]):
        out[:, c] = np.bincount(parts, weights=weights[:, c], minlength=k).astype(np.int64)
    return out


def capacity(
    total: npt.NDArray[np.int64], k: int, slack: float | npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Per-constraint load limit: the mean times (1 + slack), and never below one unit over
    the mean (small integer totals cannot be split more finely)."""
    mean = total / k
    return np.maximum(mean * (1.0 + slack), np.floor(mean) + 1.0)


def is_balanced(
    parts: npt.NDArray[Any],
    weights: npt.NDArray[np.int64],
    k: int,
    tolerance: float | Sequence[float] = DEFAULT_TOLERANCE,
) -> bool:
    """True when every constraint's largest load is within its tolerance of the mean."""
    slack = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), (weights.shape[1],))
    return bool(np.all(loads(parts, weights, k) <= capacity(weights.sum(axis=0), k, slack)))


def cut_gain(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[Any],
    parts: npt.NDArray[Any],
    nodes: npt.NDArray[np.int64],
    home: int,
    dest: int,
) -> npt.NDArray[np.int64]:
    """For each node of ``home``: its neighbours in ``dest`` minus its neighbours in ``home``
    (the cut edges saved by moving it to ``dest``)."""
    starts = indptr[nodes]
    lengths = indptr[nodes + 1] - starts
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    pos = np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)
    nb = parts[indices[pos]]
    seg = np.repeat(np.arange(len(nodes)), lengths)
    score = (nb == dest).astype(np.int8) - (nb == home).astype(np.int8)
    return np.bincount(seg, weights=score, minlength=len(nodes)).astype(np.int64)


def _into_box(
    lower: list[float],
    upper: list[float],
    vectors: list[list[float]],
    signs: list[int],
    order: list[int],
    start: list[float] | None = None,
) -> tuple[list[int], list[float]]:
    """Greedy signed subset of ``vectors`` whose sum (plus ``start``) lands in the box
    [lower, upper]; returns the chosen indices and the sum reached.

    Candidates are tried in ``order``; one is taken when it brings the running sum closer
    to the box. Stops as soon as the sum is inside.
    """
    t = list(start) if start is not None else [0.0] * len(lower)
    dims = range(len(t))

    def gap(c: int, value: float) -> float:
        if value < lower[c]:
            return lower[c] - value
        if value > upper[c]:
            return value - upper[c]
        return 0.0

    gaps = [gap(c, t[c]) for c in dims]
    chosen: list[int] = []
    if not any(gaps):
        return chosen, t
    for i in order:
        sign = signs[i]
        s = vectors[i]
        new = [gap(c, t[c] + sign * s[c]) for c in dims]
        if sum(g * g for g in new) < sum(g * g for g in gaps):
            for c in dims:
                t[c] += sign * s[c]
            gaps = new
            chosen.append(i)
            if not any(gaps):
                break
    return chosen, t


def rebalance(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[Any],
    parts: npt.NDArray[np.int32],
    weights: npt.NDArray[np.int64],
    k: int,
    *,
    tolerance: float | Sequence[float] = DEFAULT_TOLERANCE,
    max_rounds: int | None = None,
) -> npt.NDArray[np.int32]:
    """Move nodes until every constraint's largest load is within ``tolerance`` of the mean
    (one value, or one per constraint).

    ``weights`` is [N, ncon]. ``parts`` is modified in place and returned. Stops with a
    warning when the rounds run out or a pair cannot be improved.
    """
    if k <= 1 or not len(parts):
        return parts
    keep = weights.sum(axis=0) > 0
    slack = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), keep.shape)[keep]
    weights = weights[:, keep]
    total = weights.sum(axis=0)
    mean = total / k
    cap = capacity(total, k, slack)
    goal = capacity(total, k, slack / 2)  # aim below the cap so that rounds settle
    load = loads(parts, weights, k)
    rounds = max_rounds if max_rounds is not None else 8 * k * weights.shape[1]
    moved = 0
    stuck: set[tuple[int, int]] = set()
    for _ in range(rounds):
        ratio = load / cap
        if ratio.max() <= 1.0:
            break
        p, c = (int(v) for v in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        # The receiver: the partition whose pairing with p leaves the most room on the
        # tightest constraint (both under the goal needs load_p + load_q <= 2 * goal).
        pair_room = ((2 * goal - load[p] - load) / mean).min(axis=1)
        pair_room[p] = -np.inf
        for x in stuck:
            if x[0] == p:
                pair_room[x[1]] = -np.inf
        q = int(np.argmax(pair_room))
        if not np.isfinite(pair_room[q]):
            break
        side_p = np.flatnonzero(parts == p).astype(np.int64)
        side_q = np.flatnonzero(parts == q).astype(np.int64)
        nodes = np.concatenate([side_p, side_q])
        gains = np.concatenate(
            [
                cut_gain(indptr, indices, parts, side_p, p, q),
                cut_gain(indptr, indices, parts, side_q, q, p),
            ]
        )
        signs = [1] * len(side_p) + [-1] * len(side_q)
        order = np.argsort(-gains, kind="stable").tolist()
        vectors = (weights[nodes] / mean).tolist()
        # Net transfer p -> q that brings both under the goal: load_p - t <= goal and
        # load_q + t <= goal; in units of the mean load.
        lower = (load[p] - goal) / mean
        upper = (goal - load[q]) / mean
        # Where both cannot fit, even the pair out on that constraint instead.
        tight = lower > upper
        mid = (lower + upper) / 2
        lower[tight] = mid[tight] - slack[tight] / 4
        upper[tight] = mid[tight] + slack[tight] / 4
        # One-way moves first; swaps only for what they cannot fix (swaps cost cut edges).
        one_way = [i for i in order if signs[i] > 0]
        first, reached = _into_box(lower.tolist(), upper.tolist(), vectors, signs, one_way)
        taken = set(first)
        rest = [i for i in order if i not in taken]
        second, _ = _into_box(lower.tolist(), upper.tolist(), vectors, signs, rest, reached)
        chosen = np.asarray(first + second, dtype=np.int64)
        if not len(chosen):
            stuck.add((p, q))
            continue
        movers = nodes[chosen]
        parts[movers] = np.where(np.asarray(signs)[chosen] > 0, q, p).astype(parts.dtype)
        moved += len(movers)
        load = loads(parts, weights, k)
    ratio = load / cap
    if ratio.max() > 1.0:
        p, c = (int(v) for v in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
        log.warning(
            "rebalance stopped with partition %d at %.3f of the mean on constraint %d",
            p,
            load[p, c] / mean[c],
            c,
        )
    if moved:
        log.info("rebalance moved %d nodes", moved)
    return parts
