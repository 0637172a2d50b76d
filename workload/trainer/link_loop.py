"""The training loop of a link-prediction rank, of either graph kind: the node loop's epochs,
another step and another evaluation.

Training batches are packed seed edges (:mod:`distgnn_workload.sampling.seed_edges`) that
the node path's plans and pipelines carry unchanged. A step embeds the batch's seed rows,
scores positives and negatives with the decoder (:class:`~distgnn_workload.models.link.LinkModel`,
``hidden_channels`` embeddings) and minimises binary cross-entropy (bf16 autocast on a GPU,
as the node step). Validation and test rank each split's positives against their fixed
negatives over full-neighbourhood embeddings
(:meth:`~distgnn_workload.trainer.link_report.LinkRanking._rank`): MRR and Hits@K, exact
across ranks.

- :class:`LinkTrainer`, a homogeneous graph: the node loop
  (:class:`~distgnn_workload.trainer.loop.Trainer`), its pipeline's sampler a
  :class:`~distgnn_workload.sampling.link_sampler.LinkNeighborSampler`; GraphSAGE may take
  the fixed-shape (CUDA-graph) step.
- :class:`HeteroLinkTrainer`, one supervised edge type of a typed graph: the typed loop
  (:class:`~distgnn_workload.trainer.loop.HeteroTrainer`: typed batches, learnt
  embeddings of featureless types), R-SAGE or R-GCN embedding both end types. The training
  seeds are the partition Job's split of the edge type, by the partition owning their
  source; a batch's typed subgraph is sampled around both ends and the negatives, without
  the batch's own edges and their reverses
  (:class:`~distgnn_workload.sampling.link_sampler.HeteroLinkSampler`: here in worker
  mode, by the sampler servers in server-client mode).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.data.graph import EDGE_TYPE
from distgnn_workload.evaluation.link_ranking import LinkSplit
from distgnn_workload.models import build_hetero_model, build_model
from distgnn_workload.models.link import LinkModel, build_decoder
from distgnn_workload.partition.link_split import read_link_split
from distgnn_workload.runtime.link_batches import link_sampler, seed_rows
from distgnn_workload.runtime.seeds import stream_seed
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.trainer.link_graph_step import LinkGraphStep
from distgnn_workload.trainer.link_report import LinkRanking
from distgnn_workload.trainer.loop import HeteroTrainer
from distgnn_workload.trainer.rank import TypedRank
from distgnn_workload.trainer.step_policy import graph_layout

log = logging.getLogger(__name__)


def link_model(
    spec: DistGNNJobSpec, encoder: nn.Module, edge_type: EdgeType = EDGE_TYPE
) -> LinkModel:
    """``encoder`` (``hidden_channels`` outputs) and the spec's decoder, scoring ``edge_type``."""
    link = spec.link_prediction
    if link is None:
        raise ValueError("a link-prediction job needs spec.linkPrediction")
    decoder = build_decoder(link.decoder.value, spec.model.hidden_channels, spec.model.dropout)
    return LinkModel(
        encoder, decoder, link.negatives.per_positive, link.negatives.kind.value, edge_type
    )


class LinkTrainer(LinkRanking):
    """The training loop of one link-prediction rank.

    ``splits`` holds the valid and test positives (``"val"``, ``"test"``), identical on every
    rank; ``partition_dir`` is the store the full-neighbourhood embeddings read.
    """

    def __init__(
        self,
        spec: DistGNNJobSpec,
        *,
        splits: Mapping[str, LinkSplit],
        partition_dir: Path,
        num_features: int,
        **kwargs: Any,
    ) -> None:
        model = link_model(spec, build_model(spec.model, num_features, spec.model.hidden_channels))
        super().__init__(
            spec,
            model=model,
            num_features=num_features,
            num_classes=spec.model.hidden_channels,
            val_ids=[],
            test_ids=[],
            **kwargs,
        )
        self.link_to(model, splits)
        self.partition_dir = partition_dir
        self._link_graph_step(spec, num_features)

    def _link_graph_step(self, spec: DistGNNJobSpec, num_features: int) -> None:
        """The fixed-shape (CUDA-graph) step where the node path would take one: the same
        flags (``DISTGNN_CUDA_GRAPH``, a GPU, GraphSAGE, bounded fanouts), over the seed rows
        of a full link batch."""
        layout = graph_layout(
            spec,
            self.link_model.encoder,
            self.device,
            num_features,
            self.input_dtype,
            seeds=seed_rows(spec),
        )
        if layout is None:
            return
        self.static_layout = layout
        self.graph_step = LinkGraphStep(
            self.link_model,
            self.optimizer,
            layout,
            num_features=num_features,
            input_dtype=self.input_dtype,
            **self._step_options(),
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
        torch.manual_seed(spec.training.seed)
        encoder = build_hetero_model(
            spec.model,
            data.node_types,
            data.edge_types,
            data.in_channels(spec.model.embedding_size),
            spec.model.hidden_channels,
            [edge_type[0], edge_type[2]],
        )
        model = link_model(spec, encoder, edge_type)
        if at.batches is None:
            seed = stream_seed(spec.training.seed, 0, at.rank)
            sampler = link_sampler(spec, data, data.in_csr, edge_type, reverse, at.device, seed)
            at = replace(at, batches=at.worker_pipeline(spec, data, {}, sampler))
        super().__init__(spec, data, at, model=model, train_ids=train_ids)
        self.link_to(model, splits)


def read_eval_splits(store_dir: Path) -> dict[str, LinkSplit]:
    """The valid and test positives and their fixed negatives, as the partition Job wrote them."""
    out: dict[str, LinkSplit] = {}
    for name, stored in (("val", "valid"), ("test", "test")):
        split = read_link_split(store_dir, stored)
        out[name] = (split.src, split.dst, split.dst_neg)
    return out
