"""The training loop of a link-prediction rank on a heterogeneous graph.

It is the heterogeneous loop (:class:`~distgnn_workload.trainer.hetero_loop.HeteroTrainer`:
typed batches, learnt embeddings of featureless types, DDP, checkpoints) with the link
path's batches, loss and evaluation:

- the training seeds are packed edges of the supervised edge type (the partition Job's
  split, by the partition owning their source); a batch's typed subgraph is sampled around
  both ends and the negatives, without the batch's own edges and their reverses
  (:class:`~distgnn_workload.sampling.hetero_link_sampler.HeteroLinkSampler`: here in
  worker mode, by the sampler servers in server-client mode);
- the model is R-SAGE or R-GCN embedding both end types (``hidden_channels``) and the
  spec's decoder (:class:`~distgnn_workload.models.link.LinkModel`); the loss
  is binary cross-entropy (bf16 autocast on a GPU);
- validation and test rank each split's positives against their fixed negatives over
  full-neighbourhood typed embeddings of the training topology
  (:meth:`~distgnn_workload.evaluation.inference.LayerwiseInference.embeddings`),
  each rank its share, gathered for exact MRR and Hits@K.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import torch
from torch import Tensor

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.evaluation.link_ranking import LinkSplit
from distgnn_workload.models import build_hetero_model
from distgnn_workload.models.link import LinkModel, build_decoder, link_loss
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.runtime.hetero_data import HeteroTrainingData
from distgnn_workload.runtime.link_batches import link_sampler
from distgnn_workload.trainer.hetero_loop import HeteroTrainer
from distgnn_workload.trainer.hetero_pipeline import HeteroMiniBatch, stream_seed
from distgnn_workload.trainer.link_report import LinkRanking, nonempty
from distgnn_workload.trainer.rank import TypedRank


def hetero_link_model(
    spec: DistGNNJobSpec, data: HeteroTrainingData, edge_type: EdgeType
) -> LinkModel:
    """R-SAGE or R-GCN embedding both ends of ``edge_type``, and the spec's decoder."""
    lp = spec.link_prediction
    assert lp is not None
    hidden = spec.model.hidden_channels
    torch.manual_seed(spec.training.seed)
    encoder = build_hetero_model(
        spec.model,
        data.node_types,
        data.edge_types,
        data.in_channels(spec.model.embedding_size),
        hidden,
        [edge_type[0], edge_type[2]],
    )
    assert isinstance(encoder, RelationalGNN)
    decoder = build_decoder(lp.decoder.value, hidden, spec.model.dropout)
    return LinkModel(
        encoder, decoder, lp.negatives.per_positive, lp.negatives.kind.value, edge_type
    )


class HeteroLinkTrainer(LinkRanking, HeteroTrainer):
    """The training loop of one link-prediction rank over a typed graph.

    ``splits`` holds the valid and test positives (``"val"``, ``"test"``), the same on
    every rank; ``train_ids`` the packed training edges of each holder; ``at.batches`` the
    server-client pipeline (None: sample here, worker mode).
    """

    def __init__(
        self,
        spec: DistGNNJobSpec,
        data: HeteroTrainingData,
        at: TypedRank,
        *,
        splits: Mapping[str, LinkSplit],
        edge_type: EdgeType,
        reverse: EdgeType | None,
        train_ids: list[Tensor],
    ) -> None:
        lp = spec.link_prediction
        if lp is None:
            raise ValueError("a link-prediction job needs spec.linkPrediction")
        model = hetero_link_model(spec, data, edge_type)
        if at.batches is None:
            seed = stream_seed(spec.training.seed, 0, at.rank)
            sampler = link_sampler(spec, data, data.in_csr, edge_type, reverse, at.device, seed)
            at = replace(at, batches=at.worker_pipeline(spec, data, {}, sampler))
        super().__init__(spec, data, at, model=model, train_ids=train_ids)
        self.link = lp
        self.edge_type = edge_type
        self.link_model = model
        self.splits = nonempty(splits, lp.evaluation.max_positives)

    def _loss(self, x: dict[str, Tensor], batch: HeteroMiniBatch) -> Tensor:
        with self.autocast():
            pos, neg = self.ddp(x, batch.hop)
        return link_loss(pos, neg)
