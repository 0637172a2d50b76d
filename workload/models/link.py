"""Link prediction: a node encoder, a decoder that scores a pair of embeddings, and the loss.

The encoder is the node path's model (GraphSAGE, GCN, GAT) with ``hidden_channels`` outputs:
node embeddings. The decoder scores pairs: ``dot`` (the inner product) or ``mlp`` (an MLP over
the element-wise product, as OGB's ``LinkPredictor`` for ogbl-citation2). Scores are logits;
training minimises binary cross-entropy over the positives (label 1) and the negatives
(label 0), averaged over all of them (PyG's ``link_pred`` examples).
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_workload.sampling.hop_batch import HopBatch
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
    """``encoder`` then ``decoder``: the positives' and the negatives' logits of a batch.

    Wrapping both in one module lets DDP reduce the decoder's gradients with the encoder's.
    """

    def __init__(self, encoder: nn.Module, decoder: nn.Module, negatives: int, kind: str):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.negatives = negatives
        self.kind = kind

    def forward(self, x: Tensor, hop: HopBatch) -> tuple[Tensor, Tensor]:
        z = self.encoder(x, hop)
        layout = LinkLayout.of_batch(hop.num_seeds, self.negatives, self.kind)
        pos_src, pos_dst, neg_src, neg_dst = layout.rows(z.device)
        return self.decoder(z[pos_src], z[pos_dst]), self.decoder(z[neg_src], z[neg_dst])


def link_loss(pos: Tensor, neg: Tensor) -> Tensor:
    """Binary cross-entropy of the logits, positives labelled 1 and negatives 0 (fp32)."""
    logits = torch.cat([pos, neg]).float()
    labels = torch.cat([torch.ones_like(pos, dtype=torch.float32), logits.new_zeros(neg.numel())])
    return F.binary_cross_entropy_with_logits(logits, labels)
