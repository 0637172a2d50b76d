"""The static-shape execution of both samplers (a homogeneous graph is the one-type case):
every hop padded to its bound, compaction by scatter, no host sync.

Bounds, for a batch capacity B of seeds of type ``t0`` and fanouts ``k[et][h]``:

- nodes of type ``t`` at hop 0: B if ``t == t0`` else 0;
- edges of ``(s, r, d)`` at hop ``h + 1``: ``nodes[d][h] * k[(s, r, d)][h]``;
- nodes of type ``s`` at hop ``h + 1``: the sum of those over the edge types out of ``s``,
  but at most ``num_nodes[s]`` (the nodes new at a hop are distinct).

Frontiers are padded with the degree-0 node ``num_nodes[t]``; scatter targets past the real
sizes go to one dump slot at the end of each buffer. The sizes come back as one tensor, so
the caller syncs once; on CUDA the whole function is captured in a CUDA graph. The buffers
may also be sized by caps fitted to sampled batches, below these bounds
(:mod:`~distgnn_workload.sampling.fitted_caps`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.sampling import edge_exclusion
from distgnn_workload.sampling.csr import TypedCSR
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.relabel import relabel_static
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions

FIT_HEADROOM = 1.25
"""Fitted caps (:meth:`StaticCaps.fitted`): the largest size seen times this, ..."""
FIT_SLACK = 256
"""... plus this, ..."""
FIT_ROUND = 128
"""... rounded up to a multiple of this."""


@dataclass(frozen=True)
class StaticCaps:
    """Per node type the node bound of each hop; per edge type the edge bound of each hop."""

    nodes: dict[str, list[int]]
    edges: dict[EdgeType, list[int]]

    @classmethod
    def of(
        cls,
        graph: TypedCSR,
        fanouts: dict[EdgeType, list[int]],
        seed_type: str,
        capacity: int,
    ) -> StaticCaps:
        return cls.bounds(graph.num_nodes, graph.edge_types, fanouts, seed_type, capacity)

    @classmethod
    def bounds(
        cls,
        num_nodes: Mapping[str, int],
        edge_types: Sequence[EdgeType],
        fanouts: Mapping[EdgeType, Sequence[int]],
        seed_type: str,
        capacity: int,
    ) -> StaticCaps:
        """The bounds of a graph with ``num_nodes`` per type and ``edge_types`` (in the
        sampler's order), sampled at ``fanouts`` around up to ``capacity`` seeds."""
        num_hops = len(next(iter(fanouts.values())))
        nodes = {t: [capacity if t == seed_type else 0] for t in num_nodes}
        edges: dict[EdgeType, list[int]] = {et: [] for et in edge_types}
        for h in range(num_hops):
            reached = dict.fromkeys(num_nodes, 0)
            for et in edge_types:
                edges[et].append(nodes[et[2]][h] * max(fanouts[et][h], 0))
                reached[et[0]] += edges[et][h]
            for t, n in reached.items():
                nodes[t].append(min(n, num_nodes[t]))
        return cls(nodes, edges)

    def target_cap(self, node_type: str) -> int:
        """Bound on the targets of an edge type into ``node_type``: its nodes of hops 0..L-1."""
        return sum(self.nodes[node_type][:-1])

    def flat(self) -> list[int]:
        """The caps in the order of :attr:`StaticOut.counts`: per node type its L + 1 hop
        caps, then per edge type its L hop caps."""
        return [c for caps in self.nodes.values() for c in caps] + [
            c for caps in self.edges.values() for c in caps
        ]

    def from_flat(self, values: Sequence[float]) -> StaticCaps:
        """Caps of this shape holding ``values`` (in :meth:`flat`'s order)."""
        it = iter(int(v) for v in values)
        nodes = {t: [next(it) for _ in caps] for t, caps in self.nodes.items()}
        edges = {et: [next(it) for _ in caps] for et, caps in self.edges.items()}
        return StaticCaps(nodes, edges)

    def exceeded_by(self, sizes: Sequence[int]) -> bool:
        """Whether a run's ``counts`` (read back) exceed these caps anywhere."""
        return any(n > c for n, c in zip(sizes, self.flat(), strict=True))

    def fitted(
        self,
        batches: Sequence[HeteroHopBatch],
        fanouts: Mapping[EdgeType, Sequence[int]],
        *,
        headroom: float = FIT_HEADROOM,
        slack: int = FIT_SLACK,
        multiple: int = FIT_ROUND,
    ) -> StaticCaps:
        """Caps fitted to the sizes of sampled ``batches``, within these bounds.

        A hop's cap is the largest size seen times ``headroom`` plus ``slack``, rounded up
        to a ``multiple``, and never over the bound (hop 0, the seeds, keeps its bound). An
        edge cap is also at most its target type's node cap times the fanout.
        """

        def fit(seen: list[int], bound: int) -> int:
            want = math.ceil(max(seen, default=0) * headroom) + slack
            return min(bound, -(-want // multiple) * multiple)

        node_caps = {
            t: [b[0]]
            + [fit([x.num_nodes_per_hop[t][h] for x in batches], b[h]) for h in range(1, len(b))]
            for t, b in self.nodes.items()
        }
        edge_caps = {
            et: [
                min(
                    fit([x.num_edges_per_hop[et][h] for x in batches], b[h]),
                    node_caps[et[2]][h] * max(fanouts[et][h], 0),
                )
                for h in range(len(b))
            ]
            for et, b in self.edges.items()
        }
        return StaticCaps(node_caps, edge_caps)


@dataclass
class StaticOut:
    """Padded outputs of one static-shape sample (buffers reused by the next graph replay)."""

    node_ids: dict[str, Tensor]
    src: dict[EdgeType, Tensor]
    dst: dict[EdgeType, Tensor]
    edge_ids: dict[EdgeType, Tensor]  # empty unless asked for
    target_ptr: dict[EdgeType, Tensor]
    counts: Tensor  # per node type its L + 1 hop sizes, then per edge type its L hop sizes

    def typed_batch(
        self,
        sizes: list[int],
        graph: TypedCSR,
        seed_type: str,
        num_seeds: int,
        hops: int,
        with_edge_ids: bool,
    ) -> HeteroHopBatch:
        """The batch these outputs hold, cut to ``sizes`` (``counts`` read back)."""
        at = 0
        nodes_per_hop: dict[str, list[int]] = {}
        for t in graph.num_nodes:
            nodes_per_hop[t], at = sizes[at : at + hops + 1], at + hops + 1
        edges_per_hop: dict[EdgeType, list[int]] = {}
        for et in graph.edge_types:
            edges_per_hop[et], at = sizes[at : at + hops], at + hops
        num_edges = {et: sum(e) for et, e in edges_per_hop.items()}
        return HeteroHopBatch(
            seed_type=seed_type,
            num_seeds=num_seeds,
            node_ids={t: self.node_ids[t][: sum(n)].clone() for t, n in nodes_per_hop.items()},
            num_nodes_per_hop=nodes_per_hop,
            edge_index={
                et: torch.stack([self.src[et][:n], self.dst[et][:n]]) for et, n in num_edges.items()
            },
            num_edges_per_hop=edges_per_hop,
            target_ptr={
                et: self.target_ptr[et][: sum(nodes_per_hop[et[2]][:-1]) + 1].clone()
                for et in graph.edge_types
            },
            edge_ids={et: self.edge_ids[et][:n].clone() for et, n in num_edges.items()}
            if with_edge_ids
            else None,
        )

    def one_type_batch(self, sizes: list[int], num_seeds: int, hops: int) -> HopBatch:
        """The batch of a one-type graph these outputs hold, cut to ``sizes``."""
        nodes, edges = sizes[: hops + 1], sizes[hops + 1 :]
        num_edges, num_targets = sum(edges), sum(nodes[:-1])
        src, dst = self.src[EDGE_TYPE], self.dst[EDGE_TYPE]
        return HopBatch(
            node_ids=self.node_ids[NODE_TYPE][: sum(nodes)].clone(),
            num_seeds=num_seeds,
            num_nodes_per_hop=nodes,
            num_edges_per_hop=edges,
            edge_index=torch.stack([src[:num_edges], dst[:num_edges]]),
            target_ptr=self.target_ptr[EDGE_TYPE][: num_targets + 1].clone(),
        )


def _hop_draws(
    graph: TypedCSR,
    fanouts: Mapping[EdgeType, Sequence[int]],
    caps: StaticCaps,
    frontier: Mapping[str, Tensor],
    hop: int,
    generator: torch.Generator,
) -> dict[EdgeType, tuple[Tensor, Tensor, Tensor, Tensor]]:
    """Per edge type sampled at ``hop``: its frontier rows' CSR starts and degrees, and the
    neighbour positions drawn for them (:func:`uniform_subset_positions`). The edge types of
    one fanout draw in one call over their frontiers laid end to end: the rows draw
    independently, and one call is a few dozen kernels whatever the number of relations."""
    groups: dict[int, list[EdgeType]] = {}
    for et in graph.edge_types:
        if fanouts[et][hop] > 0 and caps.nodes[et[2]][hop] > 0:
            groups.setdefault(fanouts[et][hop], []).append(et)
    out: dict[EdgeType, tuple[Tensor, Tensor, Tensor, Tensor]] = {}
    for fanout, edge_types in groups.items():
        starts, degrees = [], []
        for et in edge_types:
            indptr, nodes = graph.indptr[et], frontier[et[2]]
            starts.append(indptr[nodes])
            degrees.append(indptr[nodes + 1] - starts[-1])
        pos, valid = uniform_subset_positions(torch.cat(degrees), fanout, generator)
        at = 0
        for et, start, deg in zip(edge_types, starts, degrees, strict=True):
            rows = slice(at, at + deg.numel())
            out[et] = (start, deg, pos[rows], valid[rows])
            at = rows.stop
    return out


def sample_static(
    graph: TypedCSR,
    tables: dict[str, Tensor],
    fanouts: dict[EdgeType, list[int]],
    generator: torch.Generator,
    seed_type: str,
    seeds: Tensor,
    num_seeds: Tensor,
    *,
    with_edge_ids: bool = False,
    exclude: Mapping[EdgeType, Tensor] | None = None,
    caps: StaticCaps | None = None,
) -> StaticOut:
    """Sample around ``seeds`` (padded with ``num_nodes[seed_type]``; ``num_seeds`` 0-d).

    ``caps``: the buffers' sizes, the bounds by default. Caps below the bounds
    (:meth:`StaticCaps.fitted`) may be exceeded by a batch: every write past a cap goes to
    a dump slot, the counts of the first hop that overflows are still exact, so the caller
    sees it (:meth:`StaticCaps.exceeded_by`), and then the relabel tables are left dirty:
    the caller resets them and samples the batch otherwise.

    ``tables``: per node type the sampler's global -> local id table (all -1, and all -1
    again on return). ``edge_ids`` are filled only ``with_edge_ids``. ``exclude[et]``: the
    sorted keys (:mod:`~distgnn_workload.sampling.edge_exclusion`) of edges of ``et`` to
    leave out, an edge type within one node type (a link batch's supervision edges).
    """
    for et in exclude or {}:
        if et[0] != et[2]:
            raise ValueError(f"edges to exclude need one node type at both ends, got {et}")
    dev = seeds.device
    if caps is None:
        caps = StaticCaps.of(graph, fanouts, seed_type, seeds.numel())
    elif any(caps.nodes[t][0] != (seeds.numel() if t == seed_type else 0) for t in caps.nodes):
        raise ValueError(f"caps for another batch: {seeds.numel()} seeds of {seed_type!r}")
    num_hops = len(next(iter(fanouts.values())))
    pads = graph.num_nodes
    zero = torch.zeros((), dtype=torch.int64, device=dev)

    def buffer(size: int, fill: int = 0) -> Tensor:
        return torch.full((size + 1,), fill, dtype=torch.int64, device=dev)

    node_ids = {t: buffer(sum(c), pads[t]) for t, c in caps.nodes.items()}
    src = {et: buffer(sum(c)) for et, c in caps.edges.items()}
    dst = {et: buffer(sum(c)) for et, c in caps.edges.items()}
    edge_ids = {et: buffer(sum(c)) for et, c in caps.edges.items()} if with_edge_ids else {}
    target_ptr = {et: buffer(caps.target_cap(et[2]) + 1) for et in graph.edge_types}
    node_ids[seed_type][: seeds.numel()] = seeds
    seed_table = tables[seed_type]
    seed_table[seeds] = torch.arange(seeds.numel(), dtype=seed_table.dtype, device=dev)

    frontier = {seed_type: seeds}
    num_frontier = {t: num_seeds if t == seed_type else zero for t in pads}
    lo = dict.fromkeys(pads, zero)
    hi = dict(num_frontier)
    edge_base = dict.fromkeys(graph.edge_types, zero)
    node_counts = {t: [n] for t, n in num_frontier.items()}
    edge_counts: dict[EdgeType, list[Tensor]] = {et: [] for et in graph.edge_types}
    for h in range(num_hops):
        start_hi = dict(hi)
        draws = _hop_draws(graph, fanouts, caps, frontier, h, generator)
        for et in graph.edge_types:
            s, _, d = et
            fanout, cap = fanouts[et][h], caps.nodes[d][h]
            if cap == 0:
                edge_counts[et].append(zero)
                continue
            nodes, rows = frontier[d], torch.arange(cap, device=dev)
            ptr_slot, ptr_dump = lo[d] + rows + 1, caps.target_cap(d) + 1
            ptr_slot = torch.where(
                (rows < num_frontier[d]) & (ptr_slot < ptr_dump), ptr_slot, ptr_dump
            )
            if fanout == 0:
                target_ptr[et].index_put_((ptr_slot,), edge_base[et].expand(cap))
                edge_counts[et].append(zero)
                continue
            start, deg, pos, valid_2d = draws[et]
            valid = valid_2d.reshape(-1)
            edge_pos = torch.where(valid, (start.unsqueeze(1) + pos).reshape(-1), 0)
            neighbours = torch.where(valid, graph.indices[et][edge_pos].to(torch.int64), pads[s])
            taken = deg.clamp(max=fanout)
            keys = None if exclude is None else exclude.get(et)
            if keys is not None:
                owner = nodes.unsqueeze(1).expand(-1, fanout).reshape(-1)
                valid = valid & edge_exclusion.keep_mask(keys, owner, neighbours, pads[s])
                neighbours = torch.where(valid, neighbours, pads[s])
                taken = valid.reshape(-1, fanout).sum(1)
            first, rank = relabel_static(tables[s], neighbours, valid, hi[s], pads[s])
            # edges, compacted in (target, draw) order
            edge_slot, edge_dump = torch.cumsum(valid, 0) - 1 + edge_base[et], sum(caps.edges[et])
            edge_slot = torch.where(valid & (edge_slot < edge_dump), edge_slot, edge_dump)
            src[et].index_put_((edge_slot,), tables[s][neighbours].to(torch.int64))
            draw_row = torch.div(
                torch.arange(valid.numel(), device=dev), fanout, rounding_mode="floor"
            )
            dst[et].index_put_((edge_slot,), draw_row + lo[d])
            if with_edge_ids:
                edge_ids[et].index_put_((edge_slot,), edge_pos)
            target_ptr[et].index_put_((ptr_slot,), torch.cumsum(taken, 0) + edge_base[et])
            # nodes new at this hop, in order of first appearance
            node_slot, node_dump = hi[s] + rank, sum(caps.nodes[s])
            node_ids[s].index_put_(
                (torch.where(first & (node_slot < node_dump), node_slot, node_dump),), neighbours
            )
            hi[s] = hi[s] + first.sum()
            num_edges = valid.sum()
            edge_counts[et].append(num_edges)
            edge_base[et] = edge_base[et] + num_edges
        for t in pads:
            num_new = hi[t] - start_hi[t]
            node_counts[t].append(num_new)
            cap = caps.nodes[t][h + 1]
            if h + 1 < num_hops and cap:
                ar = torch.arange(cap, device=dev)
                at = (start_hi[t] + ar).clamp_(max=sum(caps.nodes[t]))
                frontier[t] = torch.where(ar < num_new, node_ids[t][at], pads[t])
            num_frontier[t], lo[t] = num_new, start_hi[t]
    for t, table in tables.items():
        table.index_fill_(0, node_ids[t], -1)
    counts = [n for t in pads for n in node_counts[t]]
    counts += [e for et in graph.edge_types for e in edge_counts[et]]
    return StaticOut(node_ids, src, dst, edge_ids, target_ptr, torch.stack(counts))
