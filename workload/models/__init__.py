"""GNN models over hop-wise sampled batches: GraphSAGE (fast path), GCN and GAT; and over
typed batches: R-SAGE (``to_hetero(GraphSAGE)``) and R-GCN.

Every model's ``forward(x, hop)`` takes the features of ``hop.node_ids`` (a relational
model: a dict of them per node type, and a ``HeteroHopBatch``) and returns the logits of
the seeds, computing at each layer only the nodes that later layers read.
"""

from distgnn_workload.models.aggregation import mean_aggregate
from distgnn_workload.models.factory import build_hetero_model, build_model
from distgnn_workload.models.sage import GraphSAGE, SAGELayer

__all__ = ["GraphSAGE", "SAGELayer", "build_hetero_model", "build_model", "mean_aggregate"]
