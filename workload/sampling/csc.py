"""The CSC layout the samplers read, from PyG's ``edge_index``."""

from __future__ import annotations

import torch
from torch import Tensor

_INT32_MAX = 2**31 - 1


def csc_from_edge_index(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``(indptr, indices)`` listing, for every node, the sources of the edges into it.

    This is the layout ``NeighborSampler`` reads for PyG's ``edge_index = [source, target]``.
    """
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    order = torch.argsort(dst, stable=True)
    counts = torch.bincount(dst, minlength=num_nodes)
    if counts.numel() > num_nodes:
        raise ValueError(f"edge_index names node {counts.numel() - 1} but num_nodes={num_nodes}")
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=edge_index.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    index_dtype = torch.int32 if num_nodes <= _INT32_MAX else torch.int64
    return indptr, src[order].to(index_dtype)
