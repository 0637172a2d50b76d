"""Datasets: a synthetic generator and loaders of OGB raw files and PyG ``Data`` files.

Every source loads into :class:`GraphData`, a numpy CSR with features, labels and splits.
Invalid input raises :class:`DatasetError`, whose message names the file, line or field.
"""

from distgnn_workload.data.dataset import load_dataset
from distgnn_workload.data.errors import DatasetError
from distgnn_workload.data.graph import GraphData, csr_from_edges, index_dtype

__all__ = ["DatasetError", "GraphData", "csr_from_edges", "index_dtype", "load_dataset"]
