"""The samplers behind PyG's ``BaseSampler``, so that ``NodeLoader`` yields ``Data`` or
``HeteroData`` mini-batches.

PyG's own ``NeighborLoader`` needs pyg-lib or torch-sparse to sample; these adapters need
neither. The batches carry ``num_sampled_nodes``/``num_sampled_edges``, so PyG's
``trim_to_layer`` works on them. Each data-loader worker reseeds its copy of the sampler
from the worker seed, so workers draw different samples.

Typed graphs follow PyG's conventions, as its own ``NeighborSampler`` (forward direction)
returns them: the output is keyed by the graph's edge types ``(src, rel, dst)``; ``row``
indexes the sampled ``src`` nodes and ``col`` the ``dst`` nodes (messages flow row -> col,
and the sampler walks them backwards from the seeds); ``num_sampled_nodes[t]`` has L + 1
entries (hop 0: the seeds, for the seed type only) and ``num_sampled_edges[et]`` L entries,
for every node and edge type. ``edge`` holds the sampled edges' positions in the sampler's
CSR and :attr:`PyGHeteroNeighborSampler.edge_permutation` maps them to the edges of
``data[et].edge_index``, so the batches carry ``e_id`` and edge attributes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NodeSamplerInput,
    SamplerOutput,
)

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import Fanouts, csc_from_edge_index, csc_of_edge_type, type_key
from distgnn_workload.sampling.neighbor_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.one_type_sampler import NeighborSampler
from distgnn_workload.sampling.reference_hetero_sampler import ReferenceHeteroSampler


def hetero_csr(
    data: HeteroData,
) -> tuple[dict[EdgeType, tuple[Tensor, Tensor]], dict[EdgeType, Tensor]]:
    """Per edge type the destination CSR of ``data[et].edge_index`` (sources sorted within a
    row), and the permutation from CSR positions to the edges of ``edge_index``."""
    csr, perm = {}, {}
    for edge_type in data.edge_types:
        store = data[edge_type]
        name = f"data[{type_key(edge_type)!r}]"
        if "edge_index" not in store:
            raise ValueError(f"{name} has no edge_index to sample from")
        src_type, _, dst_type = edge_type
        num_src, num_dst = data[src_type].num_nodes, data[dst_type].num_nodes
        if num_src is None or num_dst is None:
            raise ValueError(f"set num_nodes (or x) of node types {src_type!r} and {dst_type!r}")
        indptr, indices, order = csc_of_edge_type(
            store.edge_index, num_src, num_dst, f"{name}.edge_index", dst_type
        )
        csr[edge_type] = (indptr, indices)
        perm[edge_type] = order
    return csr, perm


class _WorkerSampler(BaseSampler):  # type: ignore[misc]
    """What both adapters share: the wrapped sampler, reseeded once per data-loader worker."""

    sampler: NeighborSampler | HeteroNeighborSampler | ReferenceHeteroSampler

    def __init__(self, output_device: torch.device) -> None:
        self._output_device = output_device
        self._worker_id: int | None = None

    def _reseed_for_worker(self, index: NodeSamplerInput) -> None:
        if index.time is not None:
            raise NotImplementedError("temporal sampling is not supported")
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id != self._worker_id:
            self._worker_id = info.id
            self.sampler.reseed(info.seed)


class PyGNeighborSampler(_WorkerSampler):
    """Uniform neighbour sampling for ``torch_geometric.loader.NodeLoader``.

    ``NodeLoader(data, node_sampler=PyGNeighborSampler(data, [15, 10, 5]), input_nodes=...,
    batch_size=...)`` yields ``Data`` mini-batches like ``NeighborLoader`` does: seeds first,
    ``edge_index`` in local ids, ``n_id`` the global ids.
    """

    sampler: NeighborSampler

    def __init__(
        self,
        data: Data,
        num_neighbors: Sequence[int],
        *,
        device: torch.device | str | None = None,
        seed: int = 0,
    ) -> None:
        if data.edge_index is None:
            raise ValueError("data.edge_index is required to build the sampler's CSC graph")
        num_nodes = data.num_nodes
        if num_nodes is None:
            raise ValueError("data.num_nodes is unknown: set data.num_nodes or data.x")
        indptr, indices = csc_from_edge_index(data.edge_index, num_nodes)
        self.sampler = NeighborSampler(
            indptr, indices, num_neighbors, device=device or data.edge_index.device, seed=seed
        )
        super().__init__(data.edge_index.device)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        self._reseed_for_worker(index)
        hop = self.sampler.sample(index.node).to(self._output_device)
        row: Tensor = hop.edge_index[0]
        col: Tensor = hop.edge_index[1]
        return SamplerOutput(
            node=hop.node_ids,
            row=row,
            col=col,
            edge=None,
            batch=None,
            num_sampled_nodes=hop.num_nodes_per_hop,
            num_sampled_edges=hop.num_edges_per_hop,
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: Any = None) -> SamplerOutput:
        """For ``LinkLoader``: PyG's own edge sampling (its negatives, both ends of every
        edge as seeds, ``edge_label_index`` in the subgraph's ids) over this sampler."""
        from torch_geometric.sampler.neighbor_sampler import edge_sample

        if index.time is not None:
            raise NotImplementedError("temporal sampling is not supported")

        def sample_fn(seed: Tensor, seed_time: Tensor | None) -> SamplerOutput:
            return self.sample_from_nodes(NodeSamplerInput(input_id=None, node=seed))

        out: SamplerOutput = edge_sample(
            index, sample_fn, self.sampler.num_nodes, disjoint=False, neg_sampling=neg_sampling
        )
        return out


class PyGHeteroNeighborSampler(_WorkerSampler):
    """Typed uniform neighbour sampling for ``torch_geometric.loader.NodeLoader``.

    ``NodeLoader(data, node_sampler=PyGHeteroNeighborSampler(data, {et: [15, 10], ...}),
    input_nodes=("paper", idx), batch_size=...)`` yields ``HeteroData`` mini-batches like
    PyG's hetero ``NeighborLoader``: per type ``n_id``, per edge type ``edge_index`` in local
    ids and ``e_id``; the seeds first in ``data["paper"]``. ``reference=True`` samples with
    the slow :class:`ReferenceHeteroSampler` instead (for reference runs on small graphs).
    """

    sampler: HeteroNeighborSampler | ReferenceHeteroSampler

    def __init__(
        self,
        data: HeteroData,
        num_neighbors: Fanouts,
        *,
        device: torch.device | str | None = None,
        seed: int = 0,
        reference: bool = False,
    ) -> None:
        csr, self._perm = hetero_csr(data)
        if not csr:
            raise ValueError("data has no edge types to sample")
        num_nodes = {t: int(data[t].num_nodes or 0) for t in data.node_types}
        if reference:
            self.sampler = ReferenceHeteroSampler(csr, num_nodes, num_neighbors, seed=seed)
        else:
            self.sampler = HeteroNeighborSampler(
                csr, num_nodes, num_neighbors, device=device, seed=seed, return_edge_ids=True
            )
        super().__init__(next(iter(csr.values()))[0].device)

    @property
    def edge_permutation(self) -> dict[EdgeType, Tensor]:
        return self._perm

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> HeteroSamplerOutput:
        if index.input_type is None:
            raise ValueError("give NodeLoader typed input nodes: input_nodes=('paper', ids)")
        self._reseed_for_worker(index)
        batch = self.sampler.sample(index.node, index.input_type).to(self._output_device)
        return HeteroSamplerOutput(
            node=batch.node_ids,
            row={et: ei[0] for et, ei in batch.edge_index.items()},
            col={et: ei[1] for et, ei in batch.edge_index.items()},
            edge=batch.edge_ids,
            batch=None,
            num_sampled_nodes=batch.num_nodes_per_hop,
            num_sampled_edges=batch.num_edges_per_hop,
            metadata=(index.input_id, index.time),
        )

    def sample_from_edges(
        self, index: EdgeSamplerInput, neg_sampling: Any = None
    ) -> HeteroSamplerOutput:
        raise NotImplementedError(
            "PyGHeteroNeighborSampler samples from seed nodes only (NodeLoader)"
        )
