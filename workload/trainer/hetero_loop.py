"""The training loop of one rank of a heterogeneous job.

It is the homogeneous :class:`~distgnn_workload.trainer.loop.Trainer` (epochs, seed shares,
padding to equal steps, metrics, progress events, checkpoints, the result) with a typed step:

- the batches are target-type seeds sampled per edge type at the resolved fanouts, with the
  features of the featured types gathered for the sampled nodes: here
  (:class:`~distgnn_workload.trainer.hetero_pipeline.HeteroPipeline`, worker mode) or by
  the sampler servers (``batches``: a
  :class:`~distgnn_workload.trainer.pipelines.TypedRemotePipeline`);
- the featureless types' inputs are rows of learnt embeddings sharded over the ranks
  (:class:`~distgnn_workload.embeddings.ShardedEmbedding`, owned by the ranks that serve
  the partition holding the node), looked up collectively every step, every table in the
  same order on every rank, and trained by a row-sparse Adam after the dense optimizer;
- dense gradients are all-reduced by ``DistributedDataParallel``, as in the homogeneous
  loop (unused parameters allowed: a relational layer's weights of a node type with no
  node in a batch's hop get no gradient);
- evaluation is of the kinds ``training.evaluation`` asks for: sampled at the training
  fanouts (ranks with fewer evaluation batches join the others' embedding lookups with
  empty ones, so that the collectives match), or full-neighbourhood, layer-wise over every
  typed node and shared by the ranks
  (:mod:`~distgnn_workload.trainer.evaluation`);
- checkpoints hold the embedding shards and their optimizer state next to the model's
  (:mod:`distgnn_workload.embeddings.checkpoint`); every epoch restarts the sampler's and
  dropout's random streams from (seed, epoch, rank), so that a resumed run goes on as an
  uninterrupted one would.

Only the training split's seeds are sampled during training; the validation split between
epochs (``training.evalEvery``) and the test split at the end only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.edge_types import EdgeType
from distgnn_api.hetero_load import resolve_edge_fanouts
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.embeddings import (
    RowExchange,
    RowOwnership,
    RowSparseAdam,
    ShardedEmbedding,
    load_shards,
    lookup_tables,
    save_shards,
)
from distgnn_workload.embeddings.placement import host_shards, shard_bytes
from distgnn_workload.evaluation import LayerwiseInference
from distgnn_workload.evaluation.accuracy import SplitRows
from distgnn_workload.loader import Prefetcher
from distgnn_workload.models import build_hetero_model
from distgnn_workload.models.relational import RelationalGNN
from distgnn_workload.runtime.ddp import DDP_TIMEOUT_S
from distgnn_workload.runtime.device_budget import device_budget
from distgnn_workload.runtime.hetero_data import HeteroTrainingData
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.trainer.epoch_stats import EpochStats
from distgnn_workload.trainer.evaluation import typed_inference, typed_splits
from distgnn_workload.trainer.graph_step import HeteroGraphStep, typed_caps
from distgnn_workload.loader import HeteroMiniBatch
from distgnn_workload.runtime.seeds import stream_seed
from distgnn_workload.trainer.loop import Trainer
from distgnn_workload.trainer.rank import TypedRank

log = logging.getLogger(__name__)


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
        pipeline = at.batches
        fanouts = resolve_edge_fanouts(spec.model.fanout, spec.model.edge_fanouts, data.edge_types)
        if pipeline is None:
            pipeline = at.worker_pipeline(spec, data, fanouts)
        dim = spec.model.embedding_size
        torch.manual_seed(spec.training.seed)
        if model is None:
            model = build_hetero_model(
                spec.model,
                data.node_types,
                data.edge_types,
                data.in_channels(dim),
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
        self.tables: list[ShardedEmbedding] = []
        self.sparse: RowSparseAdam | None = None
        if data.featureless_types:
            exchange = RowExchange(
                at.rank, at.world_size, at.device, host_group=self.collectives.group
            )
            owners = [
                RowOwnership.from_partition_book(t, data.book[t], at.ranks_of_holder, at.world_size)
                for t in data.featureless_types
            ]
            sizes = [
                shard_bytes(o.rows_of(at.rank).numel(), dim, RowSparseAdam.state_rows)
                for o in owners
            ]
            field = "spec.trainers.embeddingMemory"
            budget = device_budget(spec.trainers.embedding_memory, at.device, 0, field=field)
            self.tables = [
                ShardedEmbedding(
                    own,
                    dim,
                    exchange,
                    seed=spec.training.seed,
                    out_dtype=dtype,
                    host_memory=on_host,
                )
                for own, on_host in zip(owners, host_shards(sizes, budget), strict=True)
            ]
            log.info("embedding tables: %s", ", ".join(repr(t) for t in self.tables))
            self.sparse = RowSparseAdam(self.tables, lr=spec.training.learning_rate)
        self.graph_step = self._typed_step(fanouts, dtype)

    def _typed_step(
        self, fanouts: Mapping[EdgeType, Sequence[int]], dtype: torch.dtype
    ) -> HeteroGraphStep | None:
        """The fixed-shape (CUDA-graph) step, where it can run (see :func:`typed_caps`)."""
        model, data = self.model, self.data
        if not isinstance(model, RelationalGNN):
            return None
        element = torch.tensor([], dtype=dtype).element_size()
        widths = data.in_channels(self.spec.model.embedding_size)
        inputs = {t: (widths[t], element) for t in model.plan.input_types}
        caps = typed_caps(
            data.node_counts,
            data.edge_types,
            fanouts,
            data.target_node_type,
            self.spec.training.batch_size,
            inputs,
            self.device,
        )
        if caps is None:
            return None
        featured = [t for t in model.plan.input_types if t in data.x]
        return HeteroGraphStep(
            model,
            self.optimizer,
            caps,
            data.edge_types,
            features={t: (widths[t], dtype) for t in featured},
            tables=[t for t in self.tables if t.node_type in model.plan.input_types],
            sparse=self.sparse,
            device=self.device,
            bf16=self.bf16,
            world_size=self.world_size,
            all_agree=self.collectives.all_agree,
        )

    # ------------------------------------------------------------------ hooks

    def _inference(self) -> tuple[LayerwiseInference, SplitRows]:
        """This rank's full-neighbourhood inference over every typed node (its share), and the
        target type's labels and split ids."""
        engine = typed_inference(
            self.data,
            self.tables,
            rank=self.rank,
            world_size=self.world_size,
            device=self.device,
            bf16=self.bf16,
            partition_dir=self.partition_dir,
        )
        return engine, typed_splits(self.data)

    def _loader(self, batches: Sequence[Batch], epoch: int | None) -> Prefetcher[Any]:
        if epoch is None and self.tables:
            # before any lookup: how many steps the evaluation takes on the busiest rank
            most = self.collectives.all_reduce([float(len(batches))], op=_MAX)[0]
            self._evaluation_steps = int(most)
        return self.hetero.epoch(batches, epoch=epoch, evaluation=self._evaluation_key)

    def evaluate(self, ids_by_holder: list[Tensor], split: str) -> float:
        # each evaluation samples its own stream, keyed by (epochs done, split): the same
        # after a resume
        self._evaluation_key = 2 * self._epochs_done + (split == "test")
        return super().evaluate(ids_by_holder, split)

    def _inputs(self, batch: HeteroMiniBatch) -> dict[str, Tensor]:
        """Features of the featured types, embedding rows of the others (collective)."""
        x = dict(batch.x)
        # the same tables in the same order on every rank, their counts in one exchange
        ids = [batch.hop.node_ids[t.node_type] for t in self.tables]
        for table, rows in zip(self.tables, lookup_tables(self.tables, ids), strict=True):
            x[table.node_type] = rows
        return x

    def _train_step(self, batch: HeteroMiniBatch) -> Tensor:
        if self.graph_step is not None:
            return self.graph_step.step(batch)
        x = self._inputs(batch)
        loss = self._loss(x, batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        if self.sparse is not None:
            self.sparse.step()  # collective: the row gradients go to their owners
        return loss

    def _loss(self, x: dict[str, Tensor], batch: HeteroMiniBatch) -> Tensor:
        """The step's loss: cross-entropy of the seeds' logits (a link job: its own)."""
        with self.autocast():
            logits = self.ddp(x, batch.hop)
        return F.cross_entropy(logits.float(), batch.y)

    def _eval_logits(self, batch: HeteroMiniBatch) -> Tensor:
        x = self._inputs(batch)
        with self.autocast():
            logits: Tensor = self.model(x, batch.hop)
        return logits

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
        # once per epoch: reading the counts per step would wait for the GPU every step
        for table in self.tables:
            rows, remote = table.take_counts()
            self.metrics.embedding_rows(table.node_type, rows, remote)
        return stats

    # ------------------------------------------------------------------ checkpoints

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


_MAX = torch.distributed.ReduceOp.MAX
