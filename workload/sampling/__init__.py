"""Neighbour sampling: hop-wise subgraphs for per-layer trimming, on CPU or GPU.

``NeighborSampler`` samples; ``HopBatch`` is its output; ``PyGNeighborSampler`` plugs the
sampler into ``torch_geometric.loader.NodeLoader`` (imported lazily: PyG is slow to import).
"""

from typing import Any

from distgnn_workload.sampling.hop_batch import HopBatch
from distgnn_workload.sampling.neighbor_sampler import NeighborSampler, csc_from_edge_index
from distgnn_workload.sampling.static_hops import StaticHops, StaticLayout, pad_hops
from distgnn_workload.sampling.uniform_subset import uniform_subset_positions

__all__ = [
    "HopBatch",
    "NeighborSampler",
    "PyGNeighborSampler",
    "StaticHops",
    "StaticLayout",
    "csc_from_edge_index",
    "pad_hops",
    "uniform_subset_positions",
]


def __getattr__(name: str) -> Any:
    if name == "PyGNeighborSampler":
        from distgnn_workload.sampling.pyg_adapter import PyGNeighborSampler

        return PyGNeighborSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
