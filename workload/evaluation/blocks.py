"""Chunks of destination nodes with their whole in-neighbourhoods, cut from the store's CSR."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from distgnn_workload.models.layerwise import NeighbourhoodBlock

DEFAULT_CHUNK_EDGES = 1 << 21
"""In-edges per chunk: a chunk reads at most this many source rows of the previous layer."""
DEFAULT_CHUNK_NODES = 1 << 16
"""Destination nodes per chunk."""


def chunk_bounds(
    indptr: npt.NDArray[np.int64],
    lo: int,
    hi: int,
    max_edges: int = DEFAULT_CHUNK_EDGES,
    max_nodes: int = DEFAULT_CHUNK_NODES,
) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` into consecutive ranges of at most ``max_nodes`` destinations and,
    unless one node alone has more, at most ``max_edges`` in-edges."""
    if max_edges < 1 or max_nodes < 1:
        raise ValueError("max_edges and max_nodes must be at least 1")
    out: list[tuple[int, int]] = []
    rows = np.asarray(indptr[lo : hi + 1], dtype=np.int64)
    a = lo
    while a < hi:
        # the furthest b with indptr[b] - indptr[a] <= max_edges, at least one node
        limit = int(rows[a - lo]) + max_edges
        b = lo + int(np.searchsorted(rows, limit, side="right")) - 1
        b = min(max(b, a + 1), a + max_nodes, hi)
        out.append((a, b))
        a = b
    return out


def build_block(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[Any],
    lo: int,
    hi: int,
    degree: Tensor,
    device: torch.device,
) -> NeighbourhoodBlock:
    """The block of destinations ``[lo, hi)``: their in-edges (CSR rows ``lo..hi``) with
    the sources relabelled, destinations first. ``degree`` is every node's in-degree."""
    start, end = int(indptr[lo]), int(indptr[hi])
    src = torch.from_numpy(np.array(indices[start:end], dtype=np.int64)).to(device)
    ptr = torch.from_numpy(np.asarray(indptr[lo : hi + 1], dtype=np.int64) - start).to(device)
    num_dst = hi - lo
    inside = (src >= lo) & (src < hi)
    others, inverse = torch.unique(src[~inside], return_inverse=True)
    local = torch.empty_like(src)
    local[inside] = src[inside] - lo
    local[~inside] = inverse + num_dst
    nodes = torch.cat([torch.arange(lo, hi, device=device, dtype=torch.int64), others])
    return NeighbourhoodBlock(
        nodes=nodes, num_dst=num_dst, ptr=ptr, src=local, degree=degree[nodes]
    )


def in_degrees(indptr: npt.NDArray[np.int64], device: torch.device) -> Tensor:
    """Every node's in-degree (its CSR row's length), int64 on ``device``."""
    return torch.from_numpy(np.diff(np.asarray(indptr, dtype=np.int64))).to(device)
