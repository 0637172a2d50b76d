"""Datasets: synthetic generators and loaders of OGB raw files and PyG ``Data`` files.

Every graph is typed (:class:`HeteroGraphData`: a CSR per edge type); a homogeneous source
loads into :class:`GraphData`, the one-type case in its own layout (one undirected CSR, with
features, labels and splits), whose :meth:`GraphData.typed` is the same graph typed.
Invalid input raises :class:`DatasetError`, whose message names the file, line or field.
"""

from distgnn_workload.data.csr import csr_from_edges, index_dtype
from distgnn_workload.data.dataset import load_dataset, load_hetero_dataset
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, HeteroGraphData

__all__ = [
    "DatasetError",
    "GraphData",
    "HeteroGraphData",
    "csr_from_edges",
    "index_dtype",
    "load_dataset",
    "load_hetero_dataset",
]
