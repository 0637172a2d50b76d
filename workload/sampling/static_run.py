"""One static-shape sample, hop by hop: every relation of a hop relabelled, compacted and
written at once.

Each relation draws its neighbours apart (:func:`hop_draws`; relations of one fanout in one
call). Then the draws of all relations of the hop, laid end to end by source node type
(:class:`~distgnn_workload.sampling.hop_layout.HopLayout`), go through one relabelling over
every type's table (:class:`~distgnn_workload.sampling.relabel.RelabelTables`, ids shifted
by their type's offset), one numbering of new nodes (each type its own, in order of first
appearance), one compaction of edges and one write per output buffer. This gives the batch
that relabelling relation after relation gives, in a fixed number of kernels per hop instead
of a few dozen per relation. No host sync: on CUDA the whole sample is captured in a graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling import edge_exclusion, relabel
from distgnn_workload.sampling.csr import TypedCSR
from distgnn_workload.sampling.hop_layout import (
    Consts,
    HopConsts,
    HopLayout,
    Regions,
    device_ints,
    hop_consts,
)
from distgnn_workload.sampling.relabel import RelabelTables
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions

Draw = tuple[Tensor, Tensor, Tensor, Tensor]
"""A relation's frontier rows' CSR starts and degrees, drawn positions and their validity."""


def _cat(parts: Sequence[Tensor]) -> Tensor:
    """``torch.cat``, without the copy a single part would cost."""
    return parts[0] if len(parts) == 1 else torch.cat(list(parts))


def _per(values: Tensor, at: Tensor, groups: int) -> Tensor:
    """``values[at]``: each entry's value of its group; with one group ``values`` itself (one
    element, broadcast), which saves a gather over every entry of the hop."""
    return values if groups == 1 else values[at]


def hop_draws(
    graph: TypedCSR,
    fanouts: Mapping[EdgeType, Sequence[int]],
    node_caps: Mapping[str, Sequence[int]],
    frontier: Mapping[str, Tensor],
    hop: int,
    generator: torch.Generator,
) -> dict[EdgeType, Draw]:
    """Per edge type sampled at ``hop``: its frontier rows' CSR starts and degrees, and the
    neighbour positions drawn for them (:func:`uniform_subset_positions`). The edge types of
    one fanout draw in one call over their frontiers laid end to end: the rows draw
    independently, and one call is a few dozen kernels whatever the number of relations."""
    groups: dict[int, list[EdgeType]] = {}
    for et in graph.edge_types:
        if fanouts[et][hop] > 0 and node_caps[et[2]][hop] > 0:
            groups.setdefault(fanouts[et][hop], []).append(et)
    out: dict[EdgeType, Draw] = {}
    for fanout, edge_types in groups.items():
        starts, degrees = [], []
        for et in edge_types:
            indptr, nodes = graph.indptr[et], frontier[et[2]]
            starts.append(indptr[nodes])
            degrees.append(indptr[nodes + 1] - starts[-1])
        pos, valid = uniform_subset_positions(_cat(degrees), fanout, generator)
        at = 0
        for et, start, deg in zip(edge_types, starts, degrees, strict=True):
            rows = slice(at, at + deg.numel())
            out[et] = (start, deg, pos[rows], valid[rows])
            at = rows.stop
    return out


class StaticRun:
    """The buffers and per-type state of one sample as it goes hop by hop.

    Outputs are regions of one buffer each (:class:`Regions`): node ids per node type
    (filled with the type's padding id), sources, targets and edge ids per edge type, target
    offsets per edge type. Per node type (vectors in node-type order): ``hi``, the next
    local id; ``lo`` and ``num_frontier``, the current frontier's first local id and size.
    Per edge type: ``edge_base``, the edges written so far.
    """

    def __init__(
        self,
        graph: TypedCSR,
        table: RelabelTables,
        node_caps: Mapping[str, Sequence[int]],
        edge_caps: Mapping[EdgeType, Sequence[int]],
        target_caps: Mapping[str, int],
        seed_type: str,
        seeds: Tensor,
        num_seeds: Tensor,
        *,
        with_edge_ids: bool,
        consts: Consts | None,
    ) -> None:
        dev = self.device = seeds.device
        self.graph, self.table, self.consts = graph, table, consts
        self.node_caps, self.edge_caps, self.target_caps = node_caps, edge_caps, target_caps
        self.types = list(graph.num_nodes)
        self.type_pos = {t: i for i, t in enumerate(self.types)}
        self.rel_pos = {et: i for i, et in enumerate(graph.edge_types)}
        self.nodes = Regions.of({t: sum(c) for t, c in node_caps.items()})
        self.edges = Regions.of({et: sum(c) for et, c in edge_caps.items()})
        self.ptrs = Regions.of({et: target_caps[et[2]] + 1 for et in graph.edge_types})
        self.node_buf = self.nodes.buffer(graph.num_nodes, dev)
        no_edges = dict.fromkeys(graph.edge_types, 0)
        self.src_buf = self.edges.buffer(no_edges, dev)
        self.dst_buf = torch.zeros_like(self.src_buf)
        self.eid_buf = torch.zeros_like(self.src_buf) if with_edge_ids else None
        self.ptr_buf = self.ptrs.buffer(no_edges, dev)
        self.node_ids = self.nodes.views(self.node_buf)
        self.node_ids[seed_type][: seeds.numel()] = seeds
        seed_table = table[seed_type]
        seed_table[seeds] = torch.arange(seeds.numel(), dtype=seed_table.dtype, device=dev)
        self.hi = torch.zeros(len(self.types), dtype=torch.int64, device=dev)
        self.hi[self.type_pos[seed_type]] = num_seeds
        self.lo, self.num_frontier = torch.zeros_like(self.hi), self.hi.clone()
        self.edge_base = torch.zeros(len(graph.edge_types), dtype=torch.int64, device=dev)
        self.frontier = {seed_type: seeds}
        self.num_hops = len(node_caps[self.types[0]]) - 1
        self.node_counts = [self.num_frontier]
        self.edge_counts: list[Tensor] = []

    def _ints(self, values: Sequence[int], columns: int) -> list[Tensor]:
        """Per-relation constants as device columns (made once, kept in ``consts``)."""
        return list(device_ints(values, self.device, self.consts).view(-1, columns).unbind(1))

    def hop(
        self,
        h: int,
        fanouts: Mapping[EdgeType, Sequence[int]],
        generator: torch.Generator,
        exclude: Mapping[EdgeType, Tensor] | None,
    ) -> None:
        """Sample hop ``h`` and make the next frontier of every node type."""
        draws = hop_draws(self.graph, fanouts, self.node_caps, self.frontier, h, generator)
        layout = HopLayout.of(self.graph.edge_types, self.types, fanouts, self.node_caps, h)
        c = hop_consts(layout, self.device, self.consts)
        start_hi = self.hi.clone()
        takens: list[Tensor] = []
        drawn: dict[EdgeType, tuple[Tensor, Tensor, Tensor]] = {}
        for et in layout.ptr_relations:
            fanout = fanouts[et][h]
            if fanout == 0:
                rows = self.node_caps[et[2]][h]
                takens.append(torch.zeros(rows, dtype=torch.int64, device=self.device))
                continue
            neighbours, valid, edge_pos, taken = self._neighbours(
                et, fanout, draws[et], None if exclude is None else exclude.get(et)
            )
            takens.append(taken)
            drawn[et] = (neighbours, valid, edge_pos)
        hop_edges = torch.zeros_like(self.edge_base)
        placed = (
            self._place(layout, c, [drawn[et] for et in layout.order]) if layout.order else None
        )
        if layout.ptr_relations:  # the offsets start from the edges before this hop's
            self._offsets(layout, c, takens)
        if placed is not None:
            new_edges, rel = placed
            self.edge_base.index_add_(0, rel, new_edges)
            hop_edges.index_copy_(0, rel, new_edges)
        self.edge_counts.append(hop_edges)
        num_new = self.hi - start_hi
        self.node_counts.append(num_new)
        last = h + 1 == self.num_hops
        for t in self.types:
            cap = self.node_caps[t][h + 1]
            if not last and cap:
                i = self.type_pos[t]
                ar = torch.arange(cap, device=self.device)
                at = (start_hi[i] + ar).clamp_(max=sum(self.node_caps[t]))
                self.frontier[t] = torch.where(
                    ar < num_new[i], self.node_ids[t][at], self.graph.num_nodes[t]
                )
        self.num_frontier, self.lo = num_new, start_hi

    def _neighbours(
        self, et: EdgeType, fanout: int, draw: Draw, keys: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """A relation's drawn neighbours (the source type's padding id where none), their
        validity, CSR positions and the edges taken per target row."""
        pad = self.graph.num_nodes[et[0]]
        start, deg, pos, valid_2d = draw
        valid = valid_2d.reshape(-1)
        edge_pos = torch.where(valid, (start.unsqueeze(1) + pos).reshape(-1), 0)
        neighbours = torch.where(valid, self.graph.indices[et][edge_pos].to(torch.int64), pad)
        if keys is None:
            return neighbours, valid, edge_pos, deg.clamp(max=fanout)
        owner = self.frontier[et[2]].unsqueeze(1).expand(-1, fanout).reshape(-1)
        valid = valid & edge_exclusion.keep_mask(keys, owner, neighbours, pad)
        neighbours = torch.where(valid, neighbours, pad)
        return neighbours, valid, edge_pos, valid.reshape(-1, fanout).sum(1)

    def _place(
        self, layout: HopLayout, c: HopConsts, drawn: list[tuple[Tensor, Tensor, Tensor]]
    ) -> tuple[Tensor, Tensor]:
        """Relabel the hop's draws, number the new nodes, write nodes and edges; the edges
        per relation of ``layout.order`` and the relations' positions."""
        table, nodes, edges = self.table, self.nodes, self.edges
        offset, node_start, node_end, edge_start, edge_end, dst_type, rel = self._ints(
            [v for et in layout.order for v in (
                table.offsets[et[0]], nodes.start[et[0]], nodes.start[et[0]] + nodes.size[et[0]],
                edges.start[et], edges.start[et] + edges.size[et], self.type_pos[et[2]],
                self.rel_pos[et],
            )],
            7,
        )  # fmt: skip
        neighbours = _cat([d[0] for d in drawn])
        valid = _cat([d[1] for d in drawn])
        at, n = c.entry_relation, len(layout.order)
        unified = (
            neighbours
            if n == 1 and not table.offsets[layout.order[0][0]]
            else (neighbours + _per(offset, at, n))
        )
        first = relabel.first_seen(table.buffer, unified, valid)
        # each source type numbers its new nodes from its hi, in order of first appearance
        seen = torch.cumsum(first, 0)
        before = c.type_bounds.before(seen).view(2, -1)
        (type_ids,) = self._ints([self.type_pos[t] for t in layout.source_types], 1)
        local = seen - 1 + _per((self.hi[type_ids] - before[0])[c.relation_type], at, n)
        any_pad = table.offsets[self.types[0]] + self.graph.num_nodes[self.types[0]]
        relabel.assign(table.buffer, unified, first, local, any_pad)
        node_slot = _per(node_start, at, n) + local
        node_slot = torch.where(first & (node_slot < _per(node_end, at, n)), node_slot, nodes.dump)
        self.node_buf.index_put_((node_slot,), neighbours)
        self.hi.index_add_(0, type_ids, before[1] - before[0])
        # edges, compacted per relation in (target, draw) order
        kept = torch.cumsum(valid, 0)
        bounds = c.relation_bounds.before(kept).view(2, -1)
        edge_slot = kept - 1 + _per(self.edge_base[rel] - bounds[0] + edge_start, at, n)
        edge_slot = torch.where(valid & (edge_slot < _per(edge_end, at, n)), edge_slot, edges.dump)
        self.src_buf.index_put_((edge_slot,), table.buffer[unified].to(torch.int64))
        self.dst_buf.index_put_((edge_slot,), c.entry_row + _per(self.lo[dst_type], at, n))
        if self.eid_buf is not None:
            self.eid_buf.index_put_((edge_slot,), _cat([d[2] for d in drawn]))
        return bounds[1] - bounds[0], rel

    def _offsets(self, layout: HopLayout, c: HopConsts, takens: list[Tensor]) -> None:
        """Write the target offsets of every relation into a type present at the hop."""
        ptr_start, ptr_end, ptr_dst, ptr_rel = self._ints(
            [v for et in layout.ptr_relations for v in (
                self.ptrs.start[et], self.target_caps[et[2]] + 1, self.type_pos[et[2]],
                self.rel_pos[et],
            )],
            4,
        )  # fmt: skip
        at, n = c.row_relation, len(layout.ptr_relations)
        taken = torch.cumsum(_cat(takens), 0)
        before = c.row_bounds.before(taken)
        offsets = taken + _per(self.edge_base[ptr_rel] - before, at, n)
        slot = _per(self.lo[ptr_dst], at, n) + c.row_index + 1
        fits = (c.row_index < _per(self.num_frontier[ptr_dst], at, n)) & (
            slot < _per(ptr_end, at, n)
        )
        slot = torch.where(fits, _per(ptr_start, at, n) + slot, self.ptrs.dump)
        self.ptr_buf.index_put_((slot,), offsets)

    def finish(
        self,
    ) -> tuple[
        dict[str, Tensor],
        dict[EdgeType, Tensor],
        dict[EdgeType, Tensor],
        dict[EdgeType, Tensor],
        dict[EdgeType, Tensor],
        Tensor,
    ]:
        """Leave the tables all -1; the outputs (as :class:`StaticOut` holds them)."""
        for t in self.types:
            self.table[t].index_fill_(0, self.node_ids[t], -1)
        counts = torch.cat(
            [
                torch.stack(self.node_counts, 1).reshape(-1),
                torch.stack(self.edge_counts, 1).reshape(-1),
            ]
        )
        return (
            self.node_ids,
            self.edges.views(self.src_buf),
            self.edges.views(self.dst_buf),
            self.edges.views(self.eid_buf) if self.eid_buf is not None else {},
            self.ptrs.views(self.ptr_buf),
            counts,
        )
