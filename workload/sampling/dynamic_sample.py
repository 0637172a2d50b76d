"""The dynamic execution of both samplers (a homogeneous graph is the one-type case): every
tensor sized exactly, two host syncs per hop and edge type.

Per hop ``h`` and edge type ``(s, r, d)``, the nodes of type ``d`` first reached at hop
``h - 1`` draw their neighbours (``sample_hop``: locally, or over RPC from the partition
that owns them); the new nodes of type ``s`` are numbered in order of first appearance, edge
type by edge type, through the relabel tables. Edges whose keys are in ``exclude`` are
dropped after the draw (:mod:`~distgnn_workload.sampling.edge_exclusion`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import TypedCSR, type_key
from distgnn_workload.sampling.edge_exclusion import drop_excluded
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.relabel import relabel


class SampledHop(NamedTuple):
    """One edge type's sampled hop: per edge its frontier row and neighbour's global id,
    edges per frontier row, and (where known) each edge's position in the CSR."""

    rows: Tensor
    neighbours: Tensor
    counts: Tensor
    edge_pos: Tensor | None


HopSampler = Callable[[EdgeType, Tensor, int], SampledHop]
"""``(edge type, frontier, fanout)`` -> that edge type's hop, rows in frontier order."""

Excluded = Mapping[EdgeType, Tensor] | None
"""Per edge type, the sorted keys of the edges a batch leaves out (none: None)."""


def sample_dynamic(
    graph: TypedCSR,
    tables: Mapping[str, Tensor],
    fanouts: dict[EdgeType, list[int]],
    sample_hop: HopSampler,
    seeds: Mapping[str, Tensor],
    seed_type: str,
    *,
    exclude: Excluded = None,
    with_edge_ids: bool = False,
) -> HeteroHopBatch:
    """Sample around ``seeds`` (per node type its hop-0 ids, on the graph's device).

    ``tables``: per node type the sampler's global -> local id table (all -1, and all -1
    again on return; the caller resets them if this raises). ``exclude[et]``: sorted keys
    of edges of ``et`` to leave out, in the key space of :meth:`TypedCSR.key_nodes`.
    """
    dev = graph.device
    empty = torch.zeros(0, dtype=torch.int64, device=dev)
    by_type = dict(seeds)
    for t, typed in by_type.items():
        tables[t][typed] = torch.arange(typed.numel(), dtype=tables[t].dtype, device=dev)
    nodes = {t: [by_type.get(t, empty)] for t in graph.num_nodes}
    frontier = {t: parts[0] for t, parts in nodes.items()}
    lo = dict.fromkeys(graph.num_nodes, 0)
    hi = {t: f.numel() for t, f in frontier.items()}
    src: dict[EdgeType, list[Tensor]] = {et: [] for et in graph.edge_types}
    dst: dict[EdgeType, list[Tensor]] = {et: [] for et in graph.edge_types}
    ids: dict[EdgeType, list[Tensor]] = {et: [] for et in graph.edge_types}
    zero = torch.zeros(1, dtype=torch.int64, device=dev)
    ptr: dict[EdgeType, list[Tensor]] = {et: [zero] for et in graph.edge_types}
    edge_counts: dict[EdgeType, list[int]] = {et: [] for et in graph.edge_types}
    for h in range(len(next(iter(fanouts.values())))):
        start_hi = dict(hi)
        new: dict[str, list[Tensor]] = {t: [] for t in graph.num_nodes}
        for et in graph.edge_types:
            s, _, d = et
            if frontier[d].numel() == 0:  # no targets of this edge type at this hop
                edge_counts[et].append(0)
                continue
            hop = sample_hop(et, frontier[d], fanouts[et][h])
            keys = None if exclude is None else exclude.get(et)
            if keys is not None and hop.neighbours.numel():
                kept, rows, neighbours, counts = drop_excluded(
                    keys, frontier[d], hop.rows, hop.neighbours, graph.key_nodes(et)
                )
                pos = None if hop.edge_pos is None else hop.edge_pos[kept]
                hop = SampledHop(rows, neighbours, counts, pos)
            local, new_nodes = relabel(tables[s], hop.neighbours, hi[s])
            hi[s] += new_nodes.numel()
            new[s].append(new_nodes)
            src[et].append(local)
            dst[et].append(hop.rows + lo[d])
            if with_edge_ids:
                if hop.edge_pos is None:
                    raise ValueError(f"edge ids of {type_key(et)} are not known here")
                ids[et].append(hop.edge_pos)
            base = sum(edge_counts[et])
            ptr[et].append(torch.cumsum(hop.counts, 0) + base)
            edge_counts[et].append(hop.neighbours.numel())
        for t, parts in new.items():
            frontier[t] = torch.cat(parts) if parts else empty
            nodes[t].append(frontier[t])
            lo[t] = start_hi[t]
    node_ids = {t: torch.cat(parts) for t, parts in nodes.items()}
    for t, table in tables.items():
        table[node_ids[t]] = -1
    return HeteroHopBatch(
        seed_type=seed_type,
        num_seeds=by_type[seed_type].numel(),
        node_ids=node_ids,
        num_nodes_per_hop={t: [p.numel() for p in parts] for t, parts in nodes.items()},
        edge_index={
            et: torch.stack([torch.cat([empty, *src[et]]), torch.cat([empty, *dst[et]])])
            for et in src
        },
        num_edges_per_hop=edge_counts,
        target_ptr={et: torch.cat(parts) for et, parts in ptr.items()},
        edge_ids={et: torch.cat([empty, *parts]) for et, parts in ids.items()}
        if with_edge_ids
        else None,
    )
