"""The training loop of a link-prediction rank: the node loop's epochs, another step and
another evaluation.

Training batches are packed seed edges (:mod:`distgnn_workload.sampling.seed_edges`) that
the node path's plans and pipelines carry unchanged; the pipeline's sampler is a
:class:`~distgnn_workload.sampling.link_sampler.LinkNeighborSampler`. A step embeds the
batch's seed rows, scores positives and negatives with the decoder and minimises binary
cross-entropy (bf16 autocast on a GPU, as the node step). Validation and test rank each
split's positives against their fixed negatives over full-neighbourhood embeddings
(:mod:`distgnn_workload.evaluation.link_ranking`): MRR and Hits@K, exact across ranks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor

from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.evaluation.link_ranking import LinkSplit
from distgnn_workload.models import build_model
from distgnn_workload.models.link import LinkModel, build_decoder, link_loss
from distgnn_workload.runtime.link_batches import seed_rows
from distgnn_workload.trainer.link_graph_step import LinkGraphStep
from distgnn_workload.trainer.link_report import LinkRanking, nonempty
from distgnn_workload.trainer.step_policy import graph_layout

log = logging.getLogger(__name__)


def link_model(spec: DistGNNJobSpec, num_features: int) -> LinkModel:
    """The encoder (``model``, ``hidden_channels`` outputs) and the spec's decoder."""
    link = spec.link_prediction
    if link is None:
        raise ValueError("a link-prediction job needs spec.linkPrediction")
    hidden = spec.model.hidden_channels
    encoder = build_model(spec.model, num_features, hidden)
    decoder = build_decoder(link.decoder.value, hidden, spec.model.dropout)
    return LinkModel(encoder, decoder, link.negatives.per_positive, link.negatives.kind.value)


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
        model = link_model(spec, num_features)
        super().__init__(
            spec,
            model=model,
            num_features=num_features,
            num_classes=spec.model.hidden_channels,
            val_ids=[],
            test_ids=[],
            **kwargs,
        )
        assert spec.link_prediction is not None
        self.link = spec.link_prediction
        self.link_model = model
        self.splits = nonempty(splits, self.link.evaluation.max_positives)
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
            device=self.device,
            bf16=self.bf16,
            world_size=self.world_size,
            all_agree=self.collectives.all_agree,
        )

    def _train_step(self, batch: Any) -> Tensor:
        if self.graph_step is not None:
            return self.graph_step.step(batch)
        with self.autocast():
            pos, neg = self.ddp(self._input(batch), batch.hop)
        loss = link_loss(pos, neg)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        return loss


def read_eval_splits(store_dir: Path) -> dict[str, LinkSplit]:
    """The valid and test positives and their fixed negatives, as the partition Job wrote them."""
    from distgnn_workload.partition.link_split import read_link_split

    out: dict[str, LinkSplit] = {}
    for name, stored in (("val", "valid"), ("test", "test")):
        split = read_link_split(store_dir, stored)
        out[name] = (split.src, split.dst, split.dst_neg)
    return out
