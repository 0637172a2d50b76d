"""GNN models over hop-wise sampled batches: GraphSAGE (fast path), GCN and GAT.

Every model's ``forward(x, hop)`` takes the features of ``hop.node_ids`` and returns the
logits of the seeds, computing at each layer only the nodes that later layers read.
"""

from distgnn_workload.models.aggregation import mean_aggregate
from distgnn_workload.models.factory import build_model
from distgnn_workload.models.sage import GraphSAGE, SAGELayer

__all__ = ["GraphSAGE", "SAGELayer", "build_model", "mean_aggregate"]
