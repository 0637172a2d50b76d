"""Neighbour sampling: hop-wise subgraphs for per-layer trimming, on CPU or GPU.

Every graph is typed (:mod:`~distgnn_workload.sampling.csr`); a homogeneous graph is the
one-type case. One module, :mod:`~distgnn_workload.sampling.neighbor_sampler`, samples both:
``HeteroNeighborSampler`` per edge type into a ``HeteroHopBatch``, ``NeighborSampler`` (its
one-type case) into a ``HopBatch`` (``HopBatch.typed()`` is its one-type view), with one
dynamic execution, one static execution and one CUDA-graph capture.
``PyGNeighborSampler`` and ``PyGHeteroNeighborSampler`` plug them into
``torch_geometric.loader.NodeLoader`` (imported lazily: PyG is slow to import);
``ReferenceHeteroSampler`` is a slow plain-PyTorch reference for tests.
"""

from typing import Any

from distgnn_workload.sampling.edges_per_seed import SampledEdgesPerSeed
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.neighbor_sampler import (
    HeteroNeighborSampler,
    csc_from_edge_index,
)
from distgnn_workload.sampling.one_type_sampler import NeighborSampler
from distgnn_workload.sampling.reference_hetero_sampler import ReferenceHeteroSampler
from distgnn_workload.sampling.static_hops import StaticHops, StaticLayout, pad_hops
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions

__all__ = [
    "HeteroHopBatch",
    "HeteroNeighborSampler",
    "HopBatch",
    "NeighborSampler",
    "PyGHeteroNeighborSampler",
    "PyGNeighborSampler",
    "ReferenceHeteroSampler",
    "SampledEdgesPerSeed",
    "StaticHops",
    "StaticLayout",
    "csc_from_edge_index",
    "pad_hops",
    "uniform_subset_positions",
]


def __getattr__(name: str) -> Any:
    if name in ("PyGNeighborSampler", "PyGHeteroNeighborSampler"):
        from distgnn_workload.sampling import pyg_adapter

        return getattr(pyg_adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
