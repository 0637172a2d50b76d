"""Vectorised uniform neighbour sampling over a CSR graph, on CPU or GPU with the same code."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions

_INT32_MAX = 2**31 - 1


def _as_tensor(array: Tensor | np.ndarray, name: str) -> Tensor:
    if isinstance(array, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(array))
    if isinstance(array, Tensor):
        return array
    raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(array).__name__}")


def _table_dtype(device: torch.device) -> torch.dtype:
    """int32 for the relabel table where ``scatter_reduce_(amin)`` supports it, else int64."""
    probe = torch.full((2,), -1, dtype=torch.int32, device=device)
    try:
        probe.scatter_reduce_(
            0, torch.zeros(1, dtype=torch.int64, device=device), probe[:1] - 1, reduce="amin"
        )
    except RuntimeError:
        return torch.int64
    return torch.int32


class NeighborSampler:
    """Samples L-hop neighbourhoods: per hop, ``fanout`` neighbours of every frontier node.

    A node of degree > fanout gets a uniformly random subset of ``fanout`` distinct neighbour
    positions (without replacement); a node of degree <= fanout gets all of its neighbours.
    A fanout of -1 takes all neighbours. ``indices[indptr[v]:indptr[v + 1]]`` are the nodes
    whose messages flow into ``v`` (for PyG's ``edge_index``, that is the CSC of the graph).

    Relabelling uses a preallocated global-id -> local-id table on the sampler's device, so
    no sort is needed; an instance is therefore not safe for concurrent ``sample`` calls
    (use one per thread). New nodes of a hop are numbered in order of first appearance.
    """

    def __init__(
        self,
        indptr: Tensor | np.ndarray,
        indices: Tensor | np.ndarray,
        fanouts: Sequence[int],
        *,
        device: torch.device | str | None = None,
        seed: int = 0,
    ) -> None:
        indptr_t = _as_tensor(indptr, "indptr")
        indices_t = _as_tensor(indices, "indices")
        if indptr_t.dim() != 1 or indptr_t.numel() < 1:
            raise ValueError("indptr must be a 1-D array of length num_nodes + 1")
        if indices_t.dim() != 1:
            raise ValueError("indices must be a 1-D array of neighbour ids")
        if indptr_t.dtype not in (torch.int32, torch.int64) or indices_t.dtype not in (
            torch.int32,
            torch.int64,
        ):
            raise TypeError(
                f"indptr/indices must be int32 or int64, got {indptr_t.dtype}/{indices_t.dtype}"
            )
        fanouts = [int(k) for k in fanouts]
        if not fanouts or any(k == 0 or k < -1 for k in fanouts):
            raise ValueError(
                f"fanouts must be a non-empty list of ints >= 1 (or -1 for all), got {fanouts}"
            )
        self.device = torch.device(device) if device is not None else indptr_t.device
        self.num_nodes = indptr_t.numel() - 1
        self.fanouts = fanouts

        indptr_t = indptr_t.to(self.device, torch.int64)
        if int(indptr_t[0]) != 0 or int(indptr_t[-1]) != indices_t.numel():
            raise ValueError(
                f"indptr must start at 0 and end at len(indices)={indices_t.numel()}, "
                f"got {int(indptr_t[0])}..{int(indptr_t[-1])}"
            )
        if bool((indptr_t[1:] < indptr_t[:-1]).any()):
            raise ValueError("indptr must be non-decreasing")
        index_dtype = torch.int32 if self.num_nodes <= _INT32_MAX else torch.int64
        self.indptr = indptr_t
        self.indices = indices_t.to(self.device, index_dtype)
        # global id -> local id of the batch being sampled; -1 = not in the batch
        self._local = torch.full(
            (self.num_nodes,), -1, dtype=_table_dtype(self.device), device=self.device
        )
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["generator"] = self.generator.get_state()
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        generator_state = state.pop("generator")
        self.__dict__.update(state)
        self.generator = torch.Generator(device=self.device)
        self.generator.set_state(generator_state)  # type: ignore[arg-type]

    def reseed(self, seed: int) -> None:
        """Restart the random stream (e.g. per data-loader worker or per rank)."""
        self.generator.manual_seed(seed)

    def sample(self, seeds: Tensor) -> HopBatch:
        """Sample the hop-wise subgraph around ``seeds`` (global ids; each occurrence is a row)."""
        seeds = seeds.to(self.device, torch.int64).reshape(-1)
        num_seeds = seeds.numel()
        if num_seeds and bool(((seeds < 0) | (seeds >= self.num_nodes)).any()):
            raise ValueError(f"seeds must be node ids in [0, {self.num_nodes})")
        local = self._local
        local[seeds] = torch.arange(num_seeds, dtype=local.dtype, device=self.device)
        nodes = [seeds]
        sources: list[Tensor] = []
        targets: list[Tensor] = []
        ptr_parts = [torch.zeros(1, dtype=torch.int64, device=self.device)]
        num_nodes_per_hop = [num_seeds]
        num_edges_per_hop: list[int] = []
        frontier, lo, hi, num_edges = seeds, 0, num_seeds, 0
        try:
            for fanout in self.fanouts:
                rows, neighbours, counts = self._sample_hop(frontier, fanout)
                src, frontier = self._relabel(neighbours, hi)
                sources.append(src)
                targets.append(rows + lo)
                ptr_parts.append(torch.cumsum(counts, 0) + num_edges)
                num_edges += neighbours.numel()
                num_edges_per_hop.append(neighbours.numel())
                num_nodes_per_hop.append(frontier.numel())
                nodes.append(frontier)
                lo, hi = hi, hi + frontier.numel()
        except BaseException:
            local.fill_(-1)
            raise
        node_ids = torch.cat(nodes)
        local[node_ids] = -1
        edge_index = torch.stack([torch.cat(sources), torch.cat(targets)])
        return HopBatch(
            node_ids=node_ids,
            num_seeds=num_seeds,
            num_nodes_per_hop=num_nodes_per_hop,
            num_edges_per_hop=num_edges_per_hop,
            edge_index=edge_index,
            target_ptr=torch.cat(ptr_parts),
        )

    def _sample_hop(self, frontier: Tensor, fanout: int) -> tuple[Tensor, Tensor, Tensor]:
        """Return (frontier row of each edge, neighbour global id, edges per frontier row)."""
        start = self.indptr[frontier]
        deg = self.indptr[frontier + 1] - start
        if fanout < 0:
            counts = deg
            total = int(deg.sum())
            rows = torch.repeat_interleave(
                torch.arange(frontier.numel(), device=self.device), deg, output_size=total
            )
            first = torch.cumsum(deg, 0) - deg
            edge_pos = start[rows] + torch.arange(total, device=self.device) - first[rows]
        else:
            pos, valid = uniform_subset_positions(deg, fanout, self.generator)
            flat = valid.reshape(-1).nonzero().squeeze(1)
            rows = torch.div(flat, fanout, rounding_mode="floor")
            edge_pos = start[rows] + pos.reshape(-1)[flat]
            counts = deg.clamp(max=fanout)
        return rows, self.indices[edge_pos].to(torch.int64), counts

    def _relabel(self, neighbours: Tensor, next_id: int) -> tuple[Tensor, Tensor]:
        """Map neighbour global ids to local ids, numbering unseen ones from ``next_id``.

        Returns (local ids, the new global ids in order of first appearance). Each unseen id
        gets a marker below -1 through an atomic ``amin`` of its positions, so the smallest
        position wins; already-numbered ids keep their value.
        """
        table = self._local
        count = neighbours.numel()
        if count > _INT32_MAX - 2:
            raise ValueError(f"a hop of {count} sampled edges is too large for int32 relabelling")
        current = table[neighbours]
        unseen = current < 0
        marker = torch.arange(count, dtype=table.dtype, device=self.device) - (count + 1)
        table.scatter_reduce_(0, neighbours, torch.where(unseen, marker, current), reduce="amin")
        first = unseen & (table[neighbours] == marker)
        new_nodes = neighbours[first]
        table[new_nodes] = torch.arange(
            next_id, next_id + new_nodes.numel(), dtype=table.dtype, device=self.device
        )
        return table[neighbours].to(torch.int64), new_nodes


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
