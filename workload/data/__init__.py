"""Datasets: synthetic generators and loaders of OGB raw files and PyG ``Data`` files.

Every homogeneous source loads into :class:`GraphData`, a numpy CSR with features, labels
and splits; every heterogeneous one into :class:`HeteroGraphData`, a CSR per edge type.
Invalid input raises :class:`DatasetError`, whose message names the file, line or field.
"""

from distgnn_workload.data.dataset import load_dataset, load_hetero_dataset
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, csr_from_edges, index_dtype
from distgnn_workload.data.hetero_graph import HeteroGraphData

__all__ = [
    "DatasetError",
    "GraphData",
    "HeteroGraphData",
    "csr_from_edges",
    "index_dtype",
    "load_dataset",
    "load_hetero_dataset",
]
