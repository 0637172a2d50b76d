"""Link prediction on one edge type of a heterogeneous graph: a relational encoder that
embeds both end types, and the homogeneous path's decoder and loss
(:mod:`distgnn_workload.models.link`).

The encoder is R-SAGE or R-GCN (``build_hetero_model``) whose last layer outputs
``hidden_channels`` for the source and the destination type of the supervised edge type;
the decoder scores a source's embedding against a destination's.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.sampling.hetero_hop_batch import HeteroHopBatch
from distgnn_workload.sampling.typed_seed_edges import TypedLinkLayout


class HeteroLinkModel(nn.Module):
    """``encoder`` then ``decoder``: the positives' and the negatives' logits of a typed
    batch of seed edges of ``edge_type`` (one module, so DDP reduces both's gradients)."""

    def __init__(
        self,
        encoder: RelationalGNN,
        decoder: nn.Module,
        edge_type: EdgeType,
        negatives: int,
        kind: str,
    ) -> None:
        super().__init__()
        ends = {edge_type[0], edge_type[2]}
        if not ends <= set(encoder.plan.target_node_types):
            raise ValueError(
                f"the encoder outputs {encoder.plan.target_node_types}, not both ends of "
                f"{edge_type}"
            )
        self.encoder = encoder
        self.decoder = decoder
        self.edge_type = edge_type
        self.negatives = negatives
        self.kind = kind

    def forward(self, x: Mapping[str, Tensor], hop: HeteroHopBatch) -> tuple[Tensor, Tensor]:
        z = self.encoder.embed_seeds(x, hop)
        s, _, d = self.edge_type
        layout = TypedLinkLayout.of_rows(
            self.edge_type, {t: hop.seed_rows(t) for t in (s, d)}, self.negatives, self.kind
        )
        pos_src, pos_dst, neg_src, neg_dst = layout.rows(z[s].device)
        pos = self.decoder(z[s][pos_src], z[d][pos_dst])
        return pos, self.decoder(z[s][neg_src], z[d][neg_dst])
