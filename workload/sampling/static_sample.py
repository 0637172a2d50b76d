"""The static-shape execution of NeighborSampler: every hop padded to its bound, compaction by
scatter, no host sync.

For a batch capacity B and fanouts f_1..f_L, hop h holds at most ``B * f_1 * ... * f_h``
nodes and edges. Seeds are padded with the degree-0 node ``num_nodes``; padding rows sample
nothing; scatter targets past the real sizes go to one dump slot at the end of each buffer.
The sizes come back as one tensor, so the caller syncs once; on CUDA the sampler captures the
whole function in a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_workload.sampling import edge_exclusion, relabel
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions


@dataclass
class StaticOut:
    """Padded outputs of one static-shape sample (buffers reused by the next graph replay)."""

    node_ids: Tensor
    src: Tensor
    dst: Tensor
    target_ptr: Tensor
    counts: Tensor  # nodes per hop (L + 1), then edges per hop (L)


def sample_static(
    *,
    local: Tensor,
    indptr: Tensor,
    indices: Tensor,
    fanouts: Sequence[int],
    generator: torch.Generator,
    device: torch.device,
    seeds: Tensor,
    num_seeds: Tensor,
    exclude: Tensor | None = None,
) -> StaticOut:
    """Sample every hop of ``seeds`` padded to its bound.

    ``local`` is the sampler's global -> local id table (all -1, and all -1 again on return);
    ``indptr`` has one extra entry for the padding node ``num_nodes = indptr.numel() - 2``;
    ``num_seeds`` is a 0-d tensor; ``exclude`` holds the sorted keys of edges to leave out.
    """
    dev, pad = device, indptr.numel() - 2
    caps = [seeds.numel()]
    for fanout in fanouts:
        caps.append(caps[-1] * fanout)
    node_cap, edge_cap, target_cap = sum(caps), sum(caps[1:]), sum(caps[:-1])
    node_ids = torch.full((node_cap + 1,), pad, dtype=torch.int64, device=dev)
    src = torch.zeros(edge_cap + 1, dtype=torch.int64, device=dev)
    dst = torch.zeros(edge_cap + 1, dtype=torch.int64, device=dev)
    target_ptr = torch.zeros(target_cap + 2, dtype=torch.int64, device=dev)
    counts = [num_seeds]
    edge_counts = []
    node_ids[: caps[0]] = seeds
    local[seeds] = torch.arange(caps[0], dtype=local.dtype, device=dev)
    frontier, num_frontier = seeds, num_seeds
    lo = torch.zeros((), dtype=torch.int64, device=dev)
    hi = num_seeds.clone()
    edge_base = torch.zeros((), dtype=torch.int64, device=dev)
    for fanout in fanouts:
        rows = torch.arange(frontier.numel(), device=dev)
        start = indptr[frontier]
        deg = indptr[frontier + 1] - start
        pos, valid = uniform_subset_positions(deg, fanout, generator)
        valid = valid.reshape(-1)
        edge_pos = torch.where(valid, (start.unsqueeze(1) + pos).reshape(-1), 0)
        neighbours = torch.where(valid, indices[edge_pos].to(torch.int64), pad)
        taken = deg.clamp(max=fanout)
        if exclude is not None:
            owner = frontier.unsqueeze(1).expand(-1, fanout).reshape(-1)
            valid = valid & edge_exclusion.keep_mask(exclude, owner, neighbours, pad)
            neighbours = torch.where(valid, neighbours, pad)
            taken = valid.reshape(-1, fanout).sum(1)
        first, rank = relabel.relabel_static(local, neighbours, valid, hi, pad)
        # edges, compacted in (target, draw) order
        edge_slot = torch.where(valid, torch.cumsum(valid, 0) - 1 + edge_base, edge_cap)
        src.index_put_((edge_slot,), local[neighbours].to(torch.int64))
        draw_row = torch.div(torch.arange(valid.numel(), device=dev), fanout, rounding_mode="floor")
        dst.index_put_((edge_slot,), draw_row + lo)
        ptr_slot = torch.where(rows < num_frontier, lo + rows + 1, target_cap + 1)
        target_ptr.index_put_((ptr_slot,), torch.cumsum(taken, 0) + edge_base)
        # nodes new at this hop, in order of first appearance
        num_new = first.sum()
        node_ids.index_put_((torch.where(first, hi + rank, node_cap),), neighbours)
        nxt = torch.full((neighbours.numel() + 1,), pad, dtype=torch.int64, device=dev)
        nxt.index_put_((torch.where(first, rank, neighbours.numel()),), neighbours)
        frontier, num_frontier = nxt[:-1], num_new
        num_edges = valid.sum()
        counts.append(num_new)
        edge_counts.append(num_edges)
        edge_base = edge_base + num_edges
        lo, hi = hi, hi + num_new
    local.index_fill_(0, node_ids, -1)
    return StaticOut(
        node_ids=node_ids,
        src=src,
        dst=dst,
        target_ptr=target_ptr,
        counts=torch.stack(counts + edge_counts),
    )
