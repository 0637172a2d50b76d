"""The static-shape execution of both samplers (a homogeneous graph is the one-type case):
every hop padded to its bound, compaction by scatter, no host sync; each hop's relations
run together (:mod:`~distgnn_workload.sampling.static_run`).

Bounds, for a batch capacity B of seeds of type ``t0`` and fanouts ``k[et][h]``:

- nodes of type ``t`` at hop 0: B if ``t == t0`` else 0;
- edges of ``(s, r, d)`` at hop ``h + 1``: ``nodes[d][h] * k[(s, r, d)][h]``;
- nodes of type ``s`` at hop ``h + 1``: the sum of those over the edge types out of ``s``,
  but at most ``num_nodes[s]`` (the nodes new at a hop are distinct).

Frontiers are padded with the degree-0 node ``num_nodes[t]``; scatter targets past the real
sizes go to the dump slot at the end of each output buffer. The sizes come back as one tensor, so
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
from distgnn_workload.sampling.csr import TypedCSR
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.hop_layout import Consts
from distgnn_workload.sampling.relabel import RelabelTables
from distgnn_workload.sampling.static_run import StaticRun

FIT_HEADROOM = 1.25
"""Fitted caps (:meth:`StaticCaps.fitted`): the largest size seen times this, ..."""
FIT_SLACK = 256
"""... plus this, ..."""
FIT_ROUND = 128
"""... rounded up to a multiple of this."""


def fitted_cap(seen: int, bound: int, fit: tuple[float, int, int] | None = None) -> int:
    """A cap fitted to the largest size ``seen``: times a headroom, plus a slack, rounded up
    to a multiple (``fit``; None: :data:`FIT_HEADROOM`, :data:`FIT_SLACK`,
    :data:`FIT_ROUND`), and never over ``bound``."""
    headroom, slack, multiple = fit or (FIT_HEADROOM, FIT_SLACK, FIT_ROUND)
    want = math.ceil(seen * headroom) + slack
    return min(bound, -(-want // multiple) * multiple)


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
            return fitted_cap(max(seen, default=0), bound, (headroom, slack, multiple))

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
        """The batch of a one-type graph these outputs hold, cut to ``sizes`` (copies: the
        padded buffers are not kept)."""
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

    def copied(self) -> StaticOut:
        """A copy of every output: the batch's own, whatever refills these buffers next."""
        return StaticOut(
            node_ids={t: v.clone() for t, v in self.node_ids.items()},
            src={et: v.clone() for et, v in self.src.items()},
            dst={et: v.clone() for et, v in self.dst.items()},
            edge_ids={et: v.clone() for et, v in self.edge_ids.items()},
            target_ptr={et: v.clone() for et, v in self.target_ptr.items()},
            counts=self.counts.clone(),
        )


def sample_static(
    graph: TypedCSR,
    tables: Mapping[str, Tensor],
    fanouts: dict[EdgeType, list[int]],
    generator: torch.Generator,
    seed_type: str,
    seeds: Tensor,
    num_seeds: Tensor,
    *,
    with_edge_ids: bool = False,
    exclude: Mapping[EdgeType, Tensor] | None = None,
    caps: StaticCaps | None = None,
    consts: Consts | None = None,
) -> StaticOut:
    """Sample around ``seeds`` (padded with ``num_nodes[seed_type]``; ``num_seeds`` 0-d).

    ``caps``: the buffers' sizes, the bounds by default. Caps below the bounds
    (:meth:`StaticCaps.fitted`) may be exceeded by a batch: every write past a cap goes to
    a dump slot, the counts of the first hop that overflows are still exact, so the caller
    sees it (:meth:`StaticCaps.exceeded_by`), and then the relabel tables are left dirty:
    the caller resets them and samples the batch otherwise.

    ``tables``: the sampler's global -> local id tables (all -1, and all -1 again on
    return): a :class:`~distgnn_workload.sampling.relabel.RelabelTables`, or one table for a
    one-type graph. ``edge_ids`` are filled only ``with_edge_ids``. ``exclude[et]``: the
    sorted keys (:mod:`~distgnn_workload.sampling.edge_exclusion`) of edges of ``et`` to
    leave out, an edge type within one node type (a link batch's supervision edges).
    ``consts``: where the hops' index tensors are kept between calls (a CUDA graph capture
    needs them made by an earlier run; see :mod:`~distgnn_workload.sampling.hop_layout`).

    Each relation draws apart; then every relation of a hop is relabelled, compacted and
    written at once (the same batch as one relation after the other would give).
    """
    for et in exclude or {}:
        if et[0] != et[2]:
            raise ValueError(f"edges to exclude need one node type at both ends, got {et}")
    if caps is None:
        caps = StaticCaps.of(graph, fanouts, seed_type, seeds.numel())
    elif any(caps.nodes[t][0] != (seeds.numel() if t == seed_type else 0) for t in caps.nodes):
        raise ValueError(f"caps for another batch: {seeds.numel()} seeds of {seed_type!r}")
    run = StaticRun(
        graph,
        RelabelTables.of(tables),
        caps.nodes,
        caps.edges,
        {t: caps.target_cap(t) for t in caps.nodes},
        seed_type,
        seeds,
        num_seeds,
        with_edge_ids=with_edge_ids,
        consts=consts,
    )
    for h in range(run.num_hops):
        run.hop(h, fanouts, generator, exclude)
    return StaticOut(*run.finish())
