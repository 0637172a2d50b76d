"""The node-classification trainers, one loop for every graph: :class:`Trainer` (accuracy,
sampled or full-neighbourhood, on the loop of :mod:`.rank_loop`) and :class:`HeteroTrainer`,
the same loop over a typed graph with typed inputs.

A typed rank's batches are target-type seeds sampled per edge type, with the featured
types' rows (:class:`~distgnn_workload.runtime.batches.HeteroPipeline`, or the sampler
servers). The featureless types' rows are learnt embeddings sharded over the ranks
(:func:`~distgnn_workload.trainer.learnt_inputs.rank_tables`), looked up collectively every
step, every table in the same order on every rank (ranks with fewer evaluation batches join
the others' lookups with empty ones), trained by a row-sparse Adam after the dense optimizer
and checkpointed beside the model. DDP allows unused parameters (a relation with no edge in a
batch gets no gradient). Full-neighbourhood evaluation runs layer-wise over every typed node
(:mod:`.evaluation`). Every typed epoch restarts the sampler's and dropout's random streams
from (seed, epoch, rank), so that a resumed run goes on as an uninterrupted one would.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cached_property
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import Tensor, nn

from distgnn_api.contract import Result
from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_api.spec import DistGNNJobSpec, EvaluationKind, EvaluationSpec
from distgnn_workload import evaluation
from distgnn_workload.embeddings import load_shards, lookup_tables, save_shards
from distgnn_workload.evaluation import LayerwiseInference
from distgnn_workload.evaluation.accuracy import SplitRows
from distgnn_workload.loader import Prefetcher
from distgnn_workload.models import build_hetero_model
from distgnn_workload.runtime.batches import HeteroBatches, HeteroPipeline
from distgnn_workload.runtime.ddp import DDP_TIMEOUT_S
from distgnn_workload.runtime.seeds import Batch, stream_seed, train_batches
from distgnn_workload.runtime.training_data import HeteroTrainingData
from distgnn_workload.sampling.static_sample import StaticCaps
from distgnn_workload.trainer import run_report
from distgnn_workload.trainer.captured_step import overlap_mode
from distgnn_workload.trainer.epoch_stats import EpochStats
from distgnn_workload.trainer.evaluation import (
    InferenceSite,
    store_inference,
    typed_inference,
    typed_splits,
)
from distgnn_workload.trainer.graph_step import typed_graph_step
from distgnn_workload.trainer.learnt_inputs import rank_tables
from distgnn_workload.trainer.rank import TypedRank
from distgnn_workload.trainer.rank_loop import RankLoop

log = logging.getLogger(__name__)

FIT_BATCHES = 8
"""A worker-mode typed rank's first batches that its sampler's and step's caps are fitted to."""


def _flat(device: torch.device) -> bool:
    """Whether the ranks all-reduce a step's dense gradients in one piece after its
    backward (so that an eager step's collectives can match a replay's)."""
    mode = overlap_mode()
    return mode == "off" or (mode == "hooks" and device.type == "cuda")


class Trainer(RankLoop):
    """The training loop of one node-classification rank: accuracy, sampled or full-neighbourhood
    as ``training.evaluation`` says."""

    def _final_result(self, epochs: int, last_val: float | None) -> Result:
        """Evaluate the final model and report it; ``last_val``: the last validation figure."""
        return run_report.accuracy_result(self, epochs, last_val)

    @property
    def _evaluation_spec(self) -> EvaluationSpec:
        return self.spec.training.evaluation

    def _has_val(self) -> bool:
        return sum(v.numel() for v in self.val_ids) > 0

    def _full_evaluation(self) -> evaluation.FullEvaluation:
        return evaluation.full_evaluation(
            self.model, self._inference, rank=self.rank, all_reduce=self._all_reduce
        )

    def _inference(self) -> tuple[evaluation.LayerwiseInference, SplitRows]:
        """This rank's full-neighbourhood inference over every node (its share), and the
        labels and split masks its accuracy counts over."""
        return store_inference(self._site())

    def _site(self) -> InferenceSite:
        """Where this rank's inference runs."""
        return InferenceSite(self.rank, self.world_size, self.device, self.bf16, self.partition_dir)

    @property
    def _val_kind(self) -> EvaluationKind:
        """The kind of the validation figures: ``training.evaluation.validation``."""
        return self._evaluation_spec.validation

    def _validate(self) -> float:
        """Validation accuracy between epochs, of the kind the spec asks for."""
        if self._val_kind == EvaluationKind.full and self._has_val():
            self.model.eval()
            figure = self._full_evaluation()(["val"])["val"]
            if figure is not None:
                self.metrics.full_accuracy("val").set(figure)
            return figure or 0.0
        return self.evaluate(self.val_ids, "val")

    def _validation_fields(self, figure: float | None) -> dict[str, Any]:
        """The progress fields of an epoch's validation figure."""
        return {
            "val_accuracy": figure,
            "val_accuracy_kind": self._val_kind if figure is not None else None,
        }


class HeteroTrainer(Trainer):
    """The training loop of one rank over a typed graph (see the module docstring)."""

    STATIC_GRAPH: ClassVar[bool] = False
    """A batch may hold no edge of some relation: its weights then get no gradient."""

    def __init__(
        self,
        spec: DistGNNJobSpec,
        data: HeteroTrainingData,
        at: TypedRank,
        *,
        model: nn.Module | None = None,
        train_ids: list[Tensor] | None = None,
    ) -> None:
        """``at``: the rank, its peers and its batch and feature sources. ``model`` and
        ``train_ids`` replace the target type's classifier and training seeds (a link job's:
        its encoder and decoder, and packed training edges, with no sampled evaluation)."""
        dtype = at.input_dtype(spec)
        fanouts = resolve_edge_fanouts(spec.model.fanout, spec.model.edge_fanouts, data.edge_types)
        pipeline = at.batches
        if pipeline is None:
            pipeline = at.worker_pipeline(spec, data, fanouts)
        torch.manual_seed(spec.training.seed)
        if model is None:
            model = build_hetero_model(
                spec.model,
                data.node_types,
                data.edge_types,
                data.in_channels(spec.model.embedding_size),
                data.num_classes,
                data.target_node_type,
            )
        link = train_ids is not None
        super().__init__(
            spec,
            **at.loop_args(),
            pipeline=pipeline,
            train_ids=data.train_ids if train_ids is None else train_ids,
            val_ids=[] if link else data.val_ids,
            test_ids=[] if link else data.test_ids,
            num_features=0,
            num_classes=data.num_classes,
            model=model,
        )
        self.data = data
        self.partition_dir = at.partition_dir
        self.hetero = pipeline
        self._epochs_done = 0
        self._evaluation_key = 0
        self._evaluation_steps = 0
        self.tables, self.sparse = rank_tables(
            spec,
            data,
            rank=at.rank,
            world_size=at.world_size,
            device=at.device,
            ranks_of_holder=at.ranks_of_holder,
            host_group=self.collectives.group,
            out_dtype=dtype,
        )
        fitted = None if link else self._fit_caps(pipeline)
        peaks = None if link else self._owner_peaks(pipeline)
        self.graph_step = typed_graph_step(
            self.model,
            self.optimizer,
            data,
            fanouts,
            batch_size=spec.training.batch_size,
            embedding_size=spec.model.embedding_size,
            input_dtype=dtype,
            tables=self.tables,
            sparse=self.sparse,
            fitted=fitted,
            owner_peaks=peaks,
            **self._step_options(),
        )

    def _fit_caps(self, pipeline: HeteroBatches) -> StaticCaps | None:
        """Fit this rank's sampler's buffers, and so its step's, to its first batches, where
        it samples them itself; None: the bounds.

        A batch over fitted caps steps eagerly. Where the ranks all-reduce bucket by bucket
        (inside a captured step, or eagerly on a CPU) the buckets go in each backward's
        order, which an eager step need not share: there the bounds (no batch goes over)."""
        if not isinstance(pipeline, HeteroPipeline):
            return None
        if not (self.world_size == 1 or _flat(self.device)):
            return None
        fitted = pipeline.fit(self._first_batches)
        if self.world_size == 1 or fitted is None:
            return fitted
        # the ranks' steps exchange embedding rows in blocks of their node caps, which must
        # be equal: the largest of each (the sampler keeps its own)
        caps = [float(v) for v in fitted.flat()]
        agreed = fitted.from_flat(self.collectives.all_reduce(caps, op=dist.ReduceOp.MAX))
        log.info(
            "typed step caps agreed over %d ranks: %d slots for nodes and edges",
            self.world_size,
            sum(agreed.flat()),
        )
        return agreed

    def _owner_peaks(self, pipeline: HeteroBatches) -> dict[str, int] | None:
        """The most nodes of each learnt table's type that one rank owned in one of the
        first batches, the largest over the ranks, where the step's lookups may exchange
        blocks fitted to them; None: blocks of the whole buffer.

        The pipeline then counts every batch's nodes per owner, and a batch over a block
        steps eagerly on every rank, as one over the caps does (so only where the ranks
        all-reduce the dense gradients in one piece, see :meth:`_fit_caps`)."""
        if self.world_size == 1 or not self.tables or not _flat(self.device):
            return None
        if not isinstance(pipeline, HeteroPipeline):
            return None
        pipeline.count_owners({t.node_type: t.owner_counts for t in self.tables})
        peaks = pipeline.owner_peaks(self._first_batches)
        seen = [float(peaks[t.node_type]) for t in self.tables]
        agreed = self.collectives.all_reduce(seen, op=dist.ReduceOp.MAX)
        return {t.node_type: int(v) for t, v in zip(self.tables, agreed, strict=True)}

    @cached_property
    def _first_batches(self) -> list[Tensor]:
        """This rank's first :data:`FIT_BATCHES` training batches of epoch 0 (their seeds;
        drawn once, for the caps and the embedding blocks)."""
        first = train_batches(
            self.train_ids,
            self.ranks_of_holder,
            self.world_size,
            self.rank,
            self.spec.training.batch_size,
            epoch=0,
            seed=self.spec.training.seed,
        )
        return [seeds for _, seeds in first[:FIT_BATCHES]]

    def _inference(self) -> tuple[LayerwiseInference, SplitRows]:
        """This rank's full-neighbourhood inference over every typed node (its share), and the
        target type's labels and split ids."""
        engine = typed_inference(self.data, self.tables, self._site())
        return engine, typed_splits(self.data)

    def _loader(self, batches: Sequence[Batch], epoch: int | None) -> Prefetcher[Any]:
        if epoch is None and self.tables:
            # before any lookup: how many steps the evaluation takes on the busiest rank
            most = self.collectives.all_reduce([float(len(batches))], op=dist.ReduceOp.MAX)[0]
            self._evaluation_steps = int(most)
        return self.hetero.epoch(batches, epoch=epoch, evaluation=self._evaluation_key)

    def evaluate(self, ids_by_holder: list[Tensor], split: str) -> float:
        # each evaluation samples its own stream, keyed by (epochs done, split): the same
        # after a resume
        self._evaluation_key = 2 * self._epochs_done + (split == "test")
        return super().evaluate(ids_by_holder, split)

    def _inputs(self, batch: Any) -> dict[str, Tensor]:
        """Features of the featured types, embedding rows of the others (collective)."""
        x = dict(batch.x)
        # the same tables in the same order on every rank, their counts in one exchange
        ids = [batch.hop.node_ids[t.node_type] for t in self.tables]
        for table, rows in zip(self.tables, lookup_tables(self.tables, ids), strict=True):
            x[table.node_type] = rows
        return x

    def _finish_eval(self, num_batches: int) -> None:
        # meet the other ranks' remaining lookups with empty ones
        empty = torch.zeros(0, dtype=torch.int64, device=self.device)
        for _ in range(self._evaluation_steps - num_batches):
            lookup_tables(self.tables, [empty] * len(self.tables))

    def train_epoch(self, epoch: int) -> EpochStats:
        # dropout's stream restarts per epoch, as the sampler's does: resumes are exact
        torch.manual_seed(stream_seed(self.spec.training.seed, epoch, self.rank))
        self._epochs_done = epoch + 1
        for table in self.tables:  # leave out the evaluations' lookups
            table.take_counts()
        stats = super().train_epoch(epoch)
        self._report_caps(epoch)
        # once per epoch: reading the counts per step would wait for the GPU every step
        for table in self.tables:
            rows, remote = table.take_counts()
            self.metrics.embedding_rows(table.node_type, rows, remote)
        return stats

    def _report_caps(self, epoch: int) -> None:
        """Log the batches that went over the fitted caps so far (each sampled again and
        stepped eagerly: slower, never wrong), if any did."""
        sampler = self.hetero.sampler if isinstance(self.hetero, HeteroPipeline) else None
        again = sampler.overflows if sampler is not None else 0
        eager = getattr(self.graph_step, "oversize", 0)
        if again or eager:
            log.info(
                "after epoch %d: %d batches went over the sampler's fitted caps (sampled "
                "again), %d steps ran eagerly over the step's caps or embedding blocks",
                epoch,
                again,
                eager,
            )

    def checkpoint(self, epochs_done: int) -> None:
        if self.sparse is not None:
            save_shards(self.run_dir, epochs_done, self.tables, self.sparse)
            # every shard is on disk before rank 0 moves latest.json
            self.collectives.barrier(DDP_TIMEOUT_S, "the embedding checkpoint")
        super().checkpoint(epochs_done)

    def resume(self) -> int | None:
        epoch = super().resume()
        self._epochs_done = self.start_epoch
        if epoch is not None and self.sparse is not None:
            path = load_shards(self.run_dir, epoch, self.tables, self.sparse)
            log.info("embedding shards of epoch %d from %s", epoch, path)
        return epoch
