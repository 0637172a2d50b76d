"""Exactly uniform k-subsets of every row's neighbourhood, for all rows at once.

This is Floyd's algorithm (Bentley & Floyd, "A sample of brilliance", CACM 1987) with its
sequential collision test rewritten as a fixed number of vectorised pointer-jumping rounds, so
a whole frontier is sampled with O(log k) batched tensor ops and no Python loop over nodes.

Floyd, for one row of degree d and fanout k: for i in 0..k-1, with j = d - k + i, draw t
uniform in [0, j]; pick t if it is not picked yet, else pick j. The result is a uniformly
random k-subset of [0, d). Let T_i be the draws and c_i = [T_i already picked]. Because a
collided T_m is itself already in the picked set, the picked set before step i is
{T_m : m < i} union {j_m : m < i, c_m}, so

    c_i = dup_i or (valid_i and c_{p_i}),   dup_i = [T_i in {T_m : m < i}],
    p_i = T_i - (d - k),                     valid_i = [0 <= p_i < i],

a chain that points strictly backwards. Pointer jumping resolves it in ceil(log2 k) rounds.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Random integers are drawn in [0, 2**62) and reduced modulo the range; the modulo bias is
# below d / 2**62 for a range of d, far beneath anything a test or a training run can see.
_RANDOM_BITS = 62

REPEATS_BY_SORT = False
"""How the collision test finds a row's draws that repeat an earlier one (:func:`repeated`):
False compares every pair of a row's draws (``k * k`` per row: three passes over
``[rows, k, k]``, the last a reduction over its innermost ``k``); True sorts the ``rows * k``
(row, draw) keys once and compares neighbours. Both give the same draws; which is faster on
a GPU is for the benchmark to say, so the pairs stay the default until it has."""


def uniform_subset_positions(
    deg: Tensor, k: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Sample, per row, ``min(deg, k)`` distinct positions in ``[0, deg)`` uniformly.

    Returns ``(pos, valid)``, both ``[n, k]``: ``pos[r, j]`` is a neighbour position of row
    ``r`` where ``valid[r, j]``. Rows with ``deg <= k`` take every position ``0..deg-1`` in
    order; rows with ``deg > k`` take a uniformly random k-subset (in no particular order).
    """
    if k < 1:
        raise ValueError(f"fanout must be >= 1 here, got {k}")
    n = deg.numel()
    device = deg.device
    deg = deg.to(torch.int64)
    ar = torch.arange(k, device=device)
    d = deg.clamp(min=k).unsqueeze(1)  # rows with deg <= k run a harmless dummy draw
    base = d - k  # j_i = base + i
    draws = torch.randint(0, 1 << _RANDOM_BITS, (n, k), device=device, generator=generator)
    t = torch.remainder(draws, base + 1 + ar)  # T_i uniform in [0, base + i]
    if k > 1:
        dup = repeated(t)
        p = t - base
        cont = (p >= 0) & (p < ar) & ~dup
        ptr = p.clamp_(0, k - 1)
        val = dup
        for _ in range(math.ceil(math.log2(k))):
            val = val | (cont & val.gather(1, ptr))
            cont = cont & cont.gather(1, ptr)
            ptr = ptr.gather(1, ptr)
        picked = torch.where(val, base + ar, t)
    else:
        picked = t
    pos = torch.where((deg > k).unsqueeze(1), picked, ar)
    valid = ar < deg.clamp(max=k).unsqueeze(1)
    return pos, valid


def repeated(t: Tensor, *, by_sort: bool | None = None) -> Tensor:
    """``[n, k]`` bool: whether ``t[r, i]`` equals some ``t[r, m]`` with ``m < i`` (``t``
    int64, ``0 <= t < 2**32``). ``by_sort`` (None: :data:`REPEATS_BY_SORT`): a stable sort
    of the keys ``row * 2**32 + t`` keeps equal draws of a row together in column order, so
    a draw repeats an earlier one exactly where the key before it in the sort is its own."""
    n, k = t.shape
    if REPEATS_BY_SORT if by_sort is None else by_sort:
        rows = torch.arange(n, device=t.device).unsqueeze(1)
        ordered, order = torch.sort(((rows << 32) | t).reshape(-1), stable=True)
        same = torch.zeros_like(ordered, dtype=torch.bool)
        same[1:] = ordered[1:] == ordered[:-1]
        return torch.empty_like(same).scatter_(0, order, same).view(n, k)
    earlier = torch.ones(k, k, dtype=torch.bool, device=t.device).tril_(-1)
    return ((t.unsqueeze(2) == t.unsqueeze(1)) & earlier).any(2)


def sample_neighbours(
    indptr: Tensor, indices: Tensor, frontier: Tensor, fanout: int, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One hop of the samplers' dynamic execution over a destination-indexed CSR (``indptr``
    int64), rows in frontier order: per edge its frontier row, its neighbour's global id
    (int64) and its position in ``indices``, and the edges per frontier row. ``fanout`` -1
    takes every neighbour; else a uniform subset of ``min(fanout, degree)`` of them."""
    device = indptr.device
    start = indptr[frontier]
    deg = indptr[frontier + 1] - start
    if fanout < 0:
        counts = deg
        total = int(deg.sum())
        rows = torch.repeat_interleave(
            torch.arange(frontier.numel(), device=device), deg, output_size=total
        )
        first = torch.cumsum(deg, 0) - deg
        edge_pos = start[rows] + torch.arange(total, device=device) - first[rows]
    else:
        pos, valid = uniform_subset_positions(deg, fanout, generator)
        flat = valid.reshape(-1).nonzero().squeeze(1)
        rows = torch.div(flat, fanout, rounding_mode="floor")
        edge_pos = start[rows] + pos.reshape(-1)[flat]
        counts = deg.clamp(max=fanout)
    return rows, indices[edge_pos].to(torch.int64), counts, edge_pos
