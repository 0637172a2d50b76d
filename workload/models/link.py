"""Link prediction: a node encoder, a decoder that scores a pair of embeddings, and the loss.

The encoder is the node path's model with ``hidden_channels`` outputs: node embeddings.
On a homogeneous graph (GraphSAGE, GCN, GAT) it embeds the one node type; on a typed graph
(R-SAGE, R-GCN) its last layer embeds the source and the destination type of the supervised
edge type. A homogeneous graph is the one-type case: its edge type is
:data:`~distgnn_workload.data.graph.EDGE_TYPE`. The decoder scores pairs: ``dot`` (the inner product) or ``mlp`` (an MLP over
the element-wise product, as OGB's ``LinkPredictor`` for ogbl-citation2). Scores are logits;
training minimises binary cross-entropy over the positives (label 1) and the negatives
(label 0), averaged over all of them (PyG's ``link_pred`` examples).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.data.graph import EDGE_TYPE, NODE_TYPE
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.sampling.hop_batch import HeteroHopBatch, HopBatch
from distgnn_workload.sampling.seed_edges import LinkLayout

DECODERS = ("dot", "mlp")
MLP_LAYERS = 3
"""Linear layers of the MLP decoder (OGB's ogbl-citation2 LinkPredictor: 3)."""


class DotDecoder(nn.Module):
    """``<z_src, z_dst>``."""

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        return (z_src * z_dst).sum(-1)


class MLPDecoder(nn.Module):
    """An MLP over ``z_src * z_dst``, ReLU between its layers, one logit out."""

    def __init__(self, channels: int, num_layers: int = MLP_LAYERS, dropout: float = 0.0) -> None:
        super().__init__()
        dims = [channels] * num_layers + [1]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.dropout = dropout

    def forward(self, z_src: Tensor, z_dst: Tensor) -> Tensor:
        h = z_src * z_dst
        for lin in self.lins[:-1]:
            h = F.relu(lin(h))
            h = F.dropout(h, p=self.dropout, training=self.training)
        out: Tensor = self.lins[-1](h).squeeze(-1)
        return out


def build_decoder(kind: str, channels: int, dropout: float = 0.0) -> nn.Module:
    if kind == "dot":
        return DotDecoder()
    if kind == "mlp":
        return MLPDecoder(channels, dropout=dropout)
    raise ValueError(f"linkPrediction.decoder must be one of {DECODERS}, got {kind!r}")


class LinkModel(nn.Module):
    """``encoder`` then ``decoder``: the positives' and the negatives' logits of a batch of
    seed edges of ``edge_type`` (:data:`EDGE_TYPE` on a homogeneous graph).

    Wrapping both in one module lets DDP reduce the decoder's gradients with the encoder's.
    A relational encoder must embed both ends of ``edge_type``.
    """

    def __init__(
        self,
        encoder: nn.Module,
        decoder: nn.Module,
        negatives: int,
        kind: str,
        edge_type: EdgeType = EDGE_TYPE,
    ) -> None:
        super().__init__()
        if isinstance(encoder, RelationalGNN):
            if not {edge_type[0], edge_type[2]} <= set(encoder.plan.target_node_types):
                raise ValueError(
                    f"the encoder outputs {encoder.plan.target_node_types}, not both ends of "
                    f"{edge_type}"
                )
        elif edge_type != EDGE_TYPE:
            raise ValueError(
                f"a homogeneous encoder embeds the one edge type {EDGE_TYPE}, not {edge_type}"
            )
        self.encoder = encoder
        self.decoder = decoder
        self.negatives = negatives
        self.kind = kind
        self.edge_type = edge_type

    def forward(
        self, x: Tensor | Mapping[str, Tensor], hop: HopBatch | HeteroHopBatch
    ) -> tuple[Tensor, Tensor]:
        s, _, d = self.edge_type
        if isinstance(hop, HeteroHopBatch):
            encoder = self.encoder
            assert isinstance(encoder, RelationalGNN)
            assert isinstance(x, Mapping)
            z = encoder.embed_seeds(x, hop)
            rows = {t: hop.seed_rows(t) for t in (s, d)}
        else:
            z = {NODE_TYPE: self.encoder(x, hop)}
            rows = {NODE_TYPE: hop.num_seeds}
        layout = LinkLayout.of_rows(self.edge_type, rows, self.negatives, self.kind)
        pos_src, pos_dst, neg_src, neg_dst = layout.rows(z[s].device)
        pos = self.decoder(z[s][pos_src], z[d][pos_dst])
        return pos, self.decoder(z[s][neg_src], z[d][neg_dst])


def link_loss(pos: Tensor, neg: Tensor) -> Tensor:
    """Binary cross-entropy of the logits, positives labelled 1 and negatives 0 (fp32)."""
    logits = torch.cat([pos, neg]).float()
    labels = torch.cat([torch.ones_like(pos, dtype=torch.float32), logits.new_zeros(neg.numel())])
    return F.binary_cross_entropy_with_logits(logits, labels)
