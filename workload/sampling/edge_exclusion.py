"""Edges a sampled subgraph must not hold: a batch's supervision edges, and their reverses.

Link prediction trains on edges that are also in the message-passing graph; a model that
sees the edge it must predict learns to look it up. As DGL GraphBolt's
``exclude_seed_edges(include_reverse_edges=True)`` does, the sampled subgraph drops those
edges after the draw: an endpoint that drew one has that many fewer neighbours at that hop.

An edge ``u -> v`` of the CSC the sampler reads (``v``'s in-neighbour ``u``) is the key
``v * (num_nodes + 1) + u``; a batch's excluded keys are sorted once, and every sampled
edge is looked up with one ``searchsorted``, on the device of the graph, with no host sync.
The key space counts the padding node ``num_nodes`` of the static execution.
"""

from __future__ import annotations

import torch
from torch import Tensor

NO_KEY = -1
"""Pads a fixed-size key buffer: no edge has a negative key."""


def edge_keys(targets: Tensor, sources: Tensor, num_nodes: int) -> Tensor:
    """The keys of edges ``sources[i] -> targets[i]`` (int64 global ids)."""
    return targets.to(torch.int64) * (num_nodes + 1) + sources.to(torch.int64)


def excluded_keys(src: Tensor, dst: Tensor, num_nodes: int, *, reverse: bool) -> Tensor:
    """Sorted keys of the edges ``src -> dst`` and, with ``reverse``, ``dst -> src``."""
    keys = edge_keys(dst, src, num_nodes)
    if reverse:
        keys = torch.cat([keys, edge_keys(src, dst, num_nodes)])
    return torch.sort(keys).values


def padded(keys: Tensor, size: int) -> Tensor:
    """``keys`` (sorted) in a buffer of ``size`` entries, :data:`NO_KEY` first, still sorted."""
    if keys.numel() > size:
        raise ValueError(f"{keys.numel()} excluded edges exceed the buffer of {size}")
    out = torch.full((size,), NO_KEY, dtype=torch.int64, device=keys.device)
    out[size - keys.numel() :] = keys
    return out


def keep_mask(keys: Tensor, targets: Tensor, sources: Tensor, num_nodes: int) -> Tensor:
    """True for the edges ``sources -> targets`` whose key is not in ``keys`` (sorted)."""
    if keys.numel() == 0:
        return torch.ones(targets.shape, dtype=torch.bool, device=targets.device)
    wanted = edge_keys(targets, sources, num_nodes)
    at = torch.searchsorted(keys, wanted).clamp_(max=keys.numel() - 1)
    return keys[at] != wanted


def drop_excluded(
    keys: Tensor, frontier: Tensor, rows: Tensor, neighbours: Tensor, num_nodes: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A dynamic hop's edges ``neighbours[i] -> frontier[rows[i]]`` without those whose key
    is in ``keys`` (sorted): ``(kept, rows, neighbours, edges per frontier row)``."""
    kept = keep_mask(keys, frontier[rows], neighbours, num_nodes)
    rows, neighbours = rows[kept], neighbours[kept]
    return kept, rows, neighbours, torch.bincount(rows, minlength=frontier.numel())
