"""A plain reference for heterogeneous link prediction: PyG's ``to_hetero(GraphSAGE)``, a
sparse ``nn.Embedding`` per featureless type trained by ``SparseAdam``, and the plain-PyTorch
:class:`ReferenceHeteroSampler` (PyG's ``LinkNeighborLoader`` needs pyg-lib or
torch-sparse). Each batch's sources and destinations (positives and uniform negatives) are
embedded from a subgraph sampled around each end type; the loss is binary cross-entropy of
their dot products. The test ranks every held-out edge against its fixed negatives over a
full-graph forward of the training topology. Deterministic for a given seed, one thread.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import HeteroGraphData
from distgnn_workload.data.pyg_hetero import to_pyg_hetero
from distgnn_workload.evaluation.link_ranking import LinkSplit, metrics_of, ranks_against
from distgnn_workload.sampling.reference_hetero_sampler import ReferenceHeteroSampler


def train_reference(
    graph: HeteroGraphData,
    train: tuple[Tensor, Tensor],
    test: LinkSplit,
    edge_type: EdgeType,
    *,
    hidden: int,
    embedding_dim: int,
    fanouts: tuple[int, ...],
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> float:
    """The reference's test MRR (see the module docstring)."""
    from torch_geometric.nn import GraphSAGE, to_hetero

    data = to_pyg_hetero(graph)
    s_t, _, d_t = edge_type
    counts = graph.node_counts
    torch.manual_seed(seed)
    emb = nn.ModuleDict(
        {t: nn.Embedding(counts[t], embedding_dim, sparse=True) for t in graph.featureless_types}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gnn = GraphSAGE((-1, -1), hidden, len(fanouts), out_channels=hidden, dropout=0.0)
        model = to_hetero(gnn, data.metadata(), aggr="sum")
    sampler = ReferenceHeteroSampler(graph.in_csr, counts, list(fanouts), seed=seed)

    def inputs(ids: Mapping[str, Tensor]) -> dict[str, Tensor]:
        x = {t: e(ids[t]) for t, e in emb.items()}
        return x | {t: data[t].x[ids[t]] for t in graph.x}

    def embed(seeds: Tensor, node_type: str) -> Tensor:
        hop = sampler.sample(seeds, node_type)
        out: dict[str, Tensor] = model(inputs(hop.node_ids), hop.edge_index)
        return out[node_type][: seeds.numel()]

    with torch.no_grad():  # materialise the lazy layers
        embed(train[0][:2], s_t)
    dense = torch.optim.Adam(model.parameters(), lr=lr)
    sparse = torch.optim.SparseAdam(list(emb.parameters()), lr=lr)
    g = torch.Generator().manual_seed(seed)
    src, dst = train
    for _ in range(epochs):
        order = torch.randperm(src.numel(), generator=g)
        for a in range(0, src.numel(), batch_size):
            ix = order[a : a + batch_size]
            b = ix.numel()
            neg_s = torch.randint(0, counts[s_t], (b,), generator=g)
            neg_d = torch.randint(0, counts[d_t], (b,), generator=g)
            z_s = embed(torch.cat([src[ix], neg_s]), s_t)
            z_d = embed(torch.cat([dst[ix], neg_d]), d_t)
            logits = (z_s * z_d).sum(-1)
            labels = torch.cat([torch.ones(b), torch.zeros(b)])
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            dense.zero_grad()
            sparse.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            dense.step()
            sparse.step()  # type: ignore[no-untyped-call]
    return _test_mrr(model, inputs, data, counts, test, edge_type)


@torch.no_grad()
def _test_mrr(
    model: Any,
    inputs: Any,
    data: Any,
    counts: Mapping[str, int],
    test: LinkSplit,
    edge_type: EdgeType,
) -> float:
    s_t, _, d_t = edge_type
    z = model(inputs({t: torch.arange(n) for t, n in counts.items()}), data.edge_index_dict)
    src, dst, neg = test
    assert neg is not None
    pos = (z[s_t][src] * z[d_t][dst]).sum(-1)
    scores = (z[s_t][src].unsqueeze(1) * z[d_t][neg]).sum(-1)
    return metrics_of(ranks_against(pos, scores), (1,)).mrr
