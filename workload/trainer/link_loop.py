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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

from distgnn_api.contract import STAGE_EVAL, LinkFigures, Result, emit_progress, rfc3339_now
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.evaluation import LayerwiseInference
from distgnn_workload.evaluation.link_ranking import LinkMetrics, LinkSplit, evaluate_splits
from distgnn_workload.models import build_model
from distgnn_workload.models.link import LinkModel, build_decoder, link_loss
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime.link_batches import seed_rows
from distgnn_workload.runtime.seeds import epoch_subset
from distgnn_workload.trainer.link_graph_step import LinkGraphStep
from distgnn_workload.trainer.loop import Trainer
from distgnn_workload.trainer.step_policy import graph_layout

log = logging.getLogger(__name__)

SPLITS = ("val", "test")


def link_model(spec: DistGNNJobSpec, num_features: int) -> LinkModel:
    """The encoder (``model``, ``hidden_channels`` outputs) and the spec's decoder."""
    link = spec.link_prediction
    if link is None:
        raise ValueError("a link-prediction job needs spec.linkPrediction")
    hidden = spec.model.hidden_channels
    encoder = build_model(spec.model, num_features, hidden)
    decoder = build_decoder(link.decoder.value, hidden, spec.model.dropout)
    return LinkModel(encoder, decoder, link.negatives.per_positive, link.negatives.kind.value)


class LinkTrainer(Trainer):
    """The training loop of one link-prediction rank.

    ``splits`` holds the valid and test positives (``"val"``, ``"test"``), identical on every
    rank; ``partition_dir`` is the store the full-neighbourhood embeddings read.
    """

    VAL_FIGURE = "val_mrr"

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
        cap = self.link.evaluation.max_positives
        self.splits = {
            name: _first(split, cap) for name, split in splits.items() if split[0].numel()
        }
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

    def _epoch_train_ids(self, epoch: int) -> Sequence[Tensor]:
        """``positivesPerEpoch``: a fresh random subset of the training positives each epoch."""
        return epoch_subset(
            self.train_ids,
            self.link.positives_per_epoch,
            epoch=epoch,
            seed=self.spec.training.seed,
        )

    def rank_splits(self, names: tuple[str, ...]) -> dict[str, LinkMetrics]:
        """MRR and Hits@K of the named splits (every rank must call)."""
        wanted = {n: self.splits[n] for n in names if n in self.splits}
        if not wanted:
            return {}
        start = time.perf_counter()
        engine = LayerwiseInference(
            PartitionStore.open(self.partition_dir),
            rank=self.rank,
            world_size=self.world_size,
            device=self.device,
            bf16=self.bf16,
        )
        figures = evaluate_splits(
            engine,
            self.link_model.encoder,
            self.link_model.decoder,
            wanted,
            self.link.evaluation.hits_at,
            self.collectives.all_gather,
        )
        for name, m in figures.items():
            self.metrics.link_figures(name, m.mrr, m.hits)
        if self.rank == 0:
            emit_progress(STAGE_EVAL, 1, 1, None, **{f"{n}_mrr": m.mrr for n, m in figures.items()})
            log.info(
                "ranking evaluation in %.1f s: %s",
                time.perf_counter() - start,
                "; ".join(f"{n} {_figures(m).summary()}" for n, m in figures.items()),
            )
        return figures

    def _validate(self) -> float:
        figures = self.rank_splits(("val",))
        return figures["val"].mrr if "val" in figures else 0.0

    def _validation_fields(self, figure: float | None) -> dict[str, Any]:
        return {"val_mrr": figure}

    def _final_result(self, epochs: int, last_val: float | None) -> Result:
        figures = self.rank_splits(SPLITS)
        test = _figures(figures["test"]) if "test" in figures else None
        val = _figures(figures["val"]) if "val" in figures else None
        result = Result(
            job_uid=self.job_uid,
            epochs=epochs,
            test_link=test,
            val_link=val,
            seeds_per_second=self._job_seeds_per_second(),
            elapsed_seconds=time.time() - self.state.started_at,
            finished_at=rfc3339_now(),
        )
        if self.tracker is not None:
            self.tracker.update(
                epoch=epochs,
                seeds_per_second=result.seeds_per_second,
                val_mrr=val.mrr if val is not None else last_val,
                test_mrr=test.mrr if test is not None else None,
                test_hits=test.hits if test is not None else None,
            )
        return result


def read_eval_splits(store_dir: Path) -> dict[str, LinkSplit]:
    """The valid and test positives and their fixed negatives, as the partition Job wrote them."""
    from distgnn_workload.partition.link_split import read_link_split

    out: dict[str, LinkSplit] = {}
    for name, stored in (("val", "valid"), ("test", "test")):
        split = read_link_split(store_dir, stored)
        out[name] = (split.src, split.dst, split.dst_neg)
    return out


def _first(split: LinkSplit, cap: int | None) -> LinkSplit:
    """The first ``cap`` positives (the store's order is fixed: a fixed subset)."""
    src, dst, neg = split
    if cap is None or src.numel() <= cap:
        return split
    return src[:cap], dst[:cap], None if neg is None else neg[:cap]


def _figures(m: LinkMetrics) -> LinkFigures:
    return LinkFigures(mrr=m.mrr, hits={str(k): v for k, v in m.hits.items()}, positives=m.count)
