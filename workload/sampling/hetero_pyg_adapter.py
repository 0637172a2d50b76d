"""The typed sampler behind PyG's ``BaseSampler``, so ``NodeLoader`` yields ``HeteroData``.

PyG's conventions, as its own ``NeighborSampler`` (forward direction) returns them: the
output is keyed by the graph's edge types ``(src, rel, dst)``; ``row`` indexes the sampled
``src`` nodes and ``col`` the ``dst`` nodes (messages flow row -> col, and the sampler walks
them backwards from the seeds); ``num_sampled_nodes[t]`` has L + 1 entries (hop 0: the
seeds, for the seed type only) and ``num_sampled_edges[et]`` L entries, for every node and
edge type, so ``trim_to_layer`` works on the batches. ``edge`` holds the sampled edges'
positions in the sampler's CSR and :attr:`edge_permutation` maps them to the edges of
``data[et].edge_index``, so the batches carry ``e_id`` and edge attributes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NodeSamplerInput,
)

from distgnn_api.edge_types import EdgeType
from distgnn_workload.sampling.csr import INT32_MAX, Fanouts, type_key
from distgnn_workload.sampling.hetero_sampler import HeteroNeighborSampler
from distgnn_workload.sampling.reference_hetero_sampler import ReferenceHeteroSampler


def hetero_csr(
    data: HeteroData,
) -> tuple[dict[EdgeType, tuple[Tensor, Tensor]], dict[EdgeType, Tensor]]:
    """Per edge type the destination CSR of ``data[et].edge_index`` (sources sorted within a
    row), and the permutation from CSR positions to the edges of ``edge_index``."""
    csr, perm = {}, {}
    for edge_type in data.edge_types:
        store = data[edge_type]
        if "edge_index" not in store:
            raise ValueError(f"data[{type_key(edge_type)!r}] has no edge_index to sample from")
        src_type, _, dst_type = edge_type
        num_src, num_dst = data[src_type].num_nodes, data[dst_type].num_nodes
        if num_src is None or num_dst is None:
            raise ValueError(f"set num_nodes (or x) of node types {src_type!r} and {dst_type!r}")
        src, dst = store.edge_index[0].to(torch.int64), store.edge_index[1].to(torch.int64)
        order = torch.argsort(dst * num_src + src, stable=True)
        counts = torch.bincount(dst, minlength=num_dst)
        if counts.numel() > num_dst:
            raise ValueError(
                f"data[{type_key(edge_type)!r}].edge_index names {dst_type!r} node "
                f"{counts.numel() - 1} but it has {num_dst} nodes"
            )
        indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
        torch.cumsum(counts, 0, out=indptr[1:])
        index_dtype = torch.int32 if num_src <= INT32_MAX else torch.int64
        csr[edge_type] = (indptr, src[order].to(index_dtype))
        perm[edge_type] = order
    return csr, perm


class PyGHeteroNeighborSampler(BaseSampler):  # type: ignore[misc]
    """Typed uniform neighbour sampling for ``torch_geometric.loader.NodeLoader``.

    ``NodeLoader(data, node_sampler=PyGHeteroNeighborSampler(data, {et: [15, 10], ...}),
    input_nodes=("paper", idx), batch_size=...)`` yields ``HeteroData`` mini-batches like
    PyG's hetero ``NeighborLoader``: per type ``n_id``, per edge type ``edge_index`` in local
    ids and ``e_id``; the seeds first in ``data["paper"]``. ``reference=True`` samples with
    the slow :class:`ReferenceHeteroSampler` instead (for reference runs on small graphs).
    Each data-loader worker reseeds its copy from the worker seed.
    """

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
        self.sampler: HeteroNeighborSampler | ReferenceHeteroSampler
        if reference:
            self.sampler = ReferenceHeteroSampler(csr, num_nodes, num_neighbors, seed=seed)
        else:
            self.sampler = HeteroNeighborSampler(
                csr, num_nodes, num_neighbors, device=device, seed=seed, return_edge_ids=True
            )
        self._output_device = next(iter(csr.values()))[0].device
        self._worker_id: int | None = None

    @property
    def edge_permutation(self) -> dict[EdgeType, Tensor]:
        return self._perm

    def _reseed_for_worker(self) -> None:
        info = torch.utils.data.get_worker_info()
        if info is not None and info.id != self._worker_id:
            self._worker_id = info.id
            self.sampler.reseed(info.seed)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> HeteroSamplerOutput:
        if index.time is not None:
            raise NotImplementedError("temporal sampling is not supported")
        if index.input_type is None:
            raise ValueError("give NodeLoader typed input nodes: input_nodes=('paper', ids)")
        self._reseed_for_worker()
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
