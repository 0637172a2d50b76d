"""A plain, slow, obviously correct typed neighbour sampler: the reference for tests.

It stands in for PyG's ``NeighborLoader`` (which needs pyg-lib or torch-sparse) in accuracy
checks, and is the yardstick of the fast :class:`HeteroNeighborSampler`: one Python loop over
frontier nodes, ``torch.randperm(degree)[:fanout]`` per node, dictionaries for relabelling.
Use it on small graphs only.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import Fanouts, TypedCSR
from distgnn_workload.sampling.hop_batch import HeteroHopBatch
from distgnn_workload.sampling.neighbor_sampler import InCSR


class ReferenceHeteroSampler:
    """Same contract and output layout as :class:`HeteroNeighborSampler`, on the CPU.

    Per hop, per edge type ``(s, r, d)`` in order, per frontier node of type ``d`` in order:
    all in-neighbours if the degree is at most the fanout (or the fanout is -1), else the
    first ``fanout`` entries of a random permutation of its neighbour positions. A source
    node not seen before gets the next local id of type ``s``.
    """

    def __init__(
        self,
        in_csr: InCSR,
        num_nodes: Mapping[str, int],
        fanouts: Fanouts,
        *,
        seed_type: str | None = None,
        seed: int = 0,
    ) -> None:
        self.graph = TypedCSR.build(in_csr, num_nodes, "cpu")
        self.fanouts = self.graph.fanouts(fanouts)
        self.num_hops = len(next(iter(self.fanouts.values())))
        self.seed_type = seed_type
        self.generator = torch.Generator().manual_seed(seed)
        self._indptr = {et: p.tolist() for et, p in self.graph.indptr.items()}
        self._indices = {et: i.tolist() for et, i in self.graph.indices.items()}

    @property
    def edge_types(self) -> list[EdgeType]:
        return self.graph.edge_types

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def sample(self, seeds: Tensor, seed_type: str | None = None) -> HeteroHopBatch:
        seed_type = seed_type or self.seed_type
        if seed_type is None:
            raise ValueError("no seed type: pass seed_type to sample() or to the sampler")
        seeds = seeds.reshape(-1).to(torch.int64).cpu()
        self.graph.check_seeds(seeds, seed_type)
        types = list(self.graph.num_nodes)
        nodes: dict[str, list[int]] = {t: [] for t in types}
        local: dict[str, dict[int, int]] = {t: {} for t in types}
        for row, v in enumerate(seeds.tolist()):
            nodes[seed_type].append(v)
            local[seed_type].setdefault(v, row)
        per_hop = {t: [len(nodes[t])] for t in types}
        frontier = {t: list(range(len(nodes[t]))) for t in types}
        edges: dict[EdgeType, list[tuple[int, int, int]]] = {et: [] for et in self.edge_types}
        edges_per_hop: dict[EdgeType, list[int]] = {et: [] for et in self.edge_types}
        ptr: dict[EdgeType, list[int]] = {et: [0] for et in self.edge_types}
        for h in range(self.num_hops):
            new: dict[str, list[int]] = {t: [] for t in types}
            for et in self.edge_types:
                s, _, d = et
                fanout, indptr, indices = self.fanouts[et][h], self._indptr[et], self._indices[et]
                before = len(edges[et])
                for target in frontier[d]:
                    start, end = indptr[nodes[d][target]], indptr[nodes[d][target] + 1]
                    degree = end - start
                    if fanout < 0 or degree <= fanout:
                        picks = list(range(degree))
                    else:
                        picks = torch.randperm(degree, generator=self.generator)[:fanout].tolist()
                    for p in picks:
                        u = indices[start + p]
                        if u not in local[s]:
                            local[s][u] = len(nodes[s])
                            nodes[s].append(u)
                            new[s].append(local[s][u])
                        edges[et].append((local[s][u], target, start + p))
                    ptr[et].append(len(edges[et]))
                edges_per_hop[et].append(len(edges[et]) - before)
            for t in types:
                per_hop[t].append(len(new[t]))
            frontier = new

        def long(values: list[int]) -> Tensor:
            return torch.tensor(values, dtype=torch.int64)

        edge_index, edge_ids = {}, {}
        for et, triples in edges.items():
            columns = list(zip(*triples, strict=True)) if triples else [(), (), ()]
            edge_index[et] = long([*columns[0], *columns[1]]).view(2, -1)
            edge_ids[et] = long(list(columns[2]))
        return HeteroHopBatch(
            seed_type=seed_type,
            num_seeds=seeds.numel(),
            node_ids={t: long(v) for t, v in nodes.items()},
            num_nodes_per_hop=per_hop,
            edge_index=edge_index,
            num_edges_per_hop=edges_per_hop,
            target_ptr={et: long(p) for et, p in ptr.items()},
            edge_ids=edge_ids,
        )
