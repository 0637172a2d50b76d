"""Full-neighbourhood evaluation: layer-wise inference over every node, shared by the trainers.

As PyG's ``inference`` and DistDGL's examples do it, layer ``l`` is computed for all nodes
before layer ``l + 1``, each node from its whole in-neighbourhood. One engine serves both
graph kinds (:mod:`.inference`): a homogeneous graph is the case of one node type and one
edge type, whose model reads one block per chunk; a relational model combines the
per-relation means of each chunk.

- rank ``r`` computes every layer for its share of each node type's ids (for a homogeneous
  store, whole partitions when the ranks divide them, :mod:`.shares`), in chunks of
  destinations whose in-edges come from the full topology CSR (:mod:`.blocks`);
- each rank reads its share's features from the store on the shared volume
  (:mod:`.store_rows`); these, and the output of every layer but the last, are all-gathered
  over the trainers' process group, so the next layer reads any node's row (:mod:`.exchange`);
- the last layer's logits never leave their rank: each counts the correct predictions of
  its share's val/test nodes of the target type and the counts are summed (:mod:`.accuracy`).

Memory per rank, for N nodes, F features, hidden width H, and b bytes per value (2 under
bf16, else 4): the gathered layer below, ``N x max(F, H) x b`` (padded to the largest
share), plus this rank's share of the current layer, ``N / world x H x b``, plus one chunk
(at most ``DEFAULT_CHUNK_EDGES`` source rows) and every node's in-degree (8N bytes). For a
products-sized graph (2.45M nodes, H=256) the gathered layer takes ~1.3 GB in bf16. A
gathered layer that would take more than half of the free GPU memory stays in host memory.
"""

from distgnn_workload.evaluation.accuracy import (
    HeldSplits,
    SplitRows,
    full_neighbourhood_accuracy,
)
from distgnn_workload.evaluation.final import (
    FinalAccuracies,
    FullEvaluation,
    final_accuracies,
    full_evaluation,
)
from distgnn_workload.evaluation.inference import LayerwiseInference
from distgnn_workload.evaluation.shares import node_shares, typed_shares

__all__ = [
    "FinalAccuracies",
    "FullEvaluation",
    "HeldSplits",
    "LayerwiseInference",
    "SplitRows",
    "final_accuracies",
    "full_evaluation",
    "full_neighbourhood_accuracy",
    "node_shares",
    "typed_shares",
]
