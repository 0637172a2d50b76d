"""The training loop of one rank: set-up, epochs, steps, checkpoints (:class:`RankLoop`).

What a rank validates and reports is its task's: accuracy
(:class:`~distgnn_workload.trainer.loop.Trainer`, over a one-type or a typed graph) or
link ranking (:class:`~distgnn_workload.trainer.link_report.LinkRanking`). The batches of an
epoch and of a sampled evaluation run in :mod:`.epoch_loop`; each epoch's figures are
reported by :mod:`.run_report`. Rank 0 writes a checkpoint every
``training.checkpointEvery`` epochs. A step is a CUDA-graph replay where one can run
(:mod:`.graph_step`), else eager under ``DistributedDataParallel``; the learnt inputs of a
typed graph's featureless types (``tables``) take a row-sparse step after the dense one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from distgnn_api.contract import Result
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.embeddings import RowSparseAdam, ShardedEmbedding
from distgnn_workload.loader import Prefetcher
from distgnn_workload.models import build_model
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.runtime.cuda_memory import CudaMemoryPhases
from distgnn_workload.runtime.ddp import DDP_TIMEOUT_S, Collectives, single_process
from distgnn_workload.runtime.seeds import Batch
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.runtime.transfers import wait_for_stream
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.trainer import epoch_loop, run_report
from distgnn_workload.trainer.captured_step import WARMUP_STEPS, CapturedStep, StepOptions
from distgnn_workload.trainer.epoch_stats import EpochStats, RunState
from distgnn_workload.trainer.graph_step import GraphStep
from distgnn_workload.trainer.run_checkpoint import restore_run, save_run
from distgnn_workload.trainer.step_policy import graph_layout
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)


class Pipeline(Protocol):
    """What the training loop needs from a data pipeline (its batches: :class:`MiniBatch`,
    or what the subclass's step takes)."""

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[Any]: ...


class RankLoop:
    """The training loop of one rank, whatever its task reports
    (:class:`~distgnn_workload.trainer.loop.Trainer`: accuracy;
    :class:`~distgnn_workload.trainer.link_report.LinkRanking`: MRR)."""

    VAL_FIGURE = "val_accuracy"
    """The progress figure an epoch's validation result is reported as."""
    partition_dir: Path | None = None
    """The store full-neighbourhood evaluation reads; None: the contract's."""
    STATIC_GRAPH: ClassVar[bool] = True
    """Every parameter is used every step: DDP's graph is static and the gradients live in its
    buckets (no copies in and out each step). False: a step may leave parameters unused."""

    def __init__(
        self,
        spec: DistGNNJobSpec,
        *,
        rank: int,
        world_size: int,
        device: torch.device,
        pipeline: Pipeline,
        collectives: Collectives | None = None,
        train_ids: list[Tensor],
        val_ids: list[Tensor],
        test_ids: list[Tensor],
        ranks_of_holder: list[list[int]],
        num_features: int,
        num_classes: int,
        run_dir: Path,
        job_uid: str,
        tracker: ProgressTracker | None = None,
        on_epoch: Callable[[], None] | None = None,
        started_at: float | None = None,
        model: nn.Module | None = None,
    ) -> None:
        self.spec = spec
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.pipeline = pipeline
        self.collectives = collectives or single_process()
        self.train_ids, self.val_ids, self.test_ids = train_ids, val_ids, test_ids
        self.ranks_of_holder = ranks_of_holder
        self.run_dir = run_dir
        self.job_uid = job_uid
        self.tracker = tracker
        self.on_epoch = on_epoch
        self.metrics = TrainerMetrics(rank)
        self.bf16 = spec.training.bf16 and device.type == "cuda"
        if spec.training.bf16 and not self.bf16:
            log.warning("training.bf16 needs a GPU; training in fp32 on %s", device)
        # Holders keep bf16 features for bf16 training; fp32 training takes fp32 input.
        self.input_dtype = torch.bfloat16 if self.bf16 else torch.float32
        torch.manual_seed(spec.training.seed)
        if model is None:
            model = build_model(spec.model, num_features, num_classes)
        self.model: nn.Module = model.to(device)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=spec.training.learning_rate,
            weight_decay=spec.training.weight_decay,
            fused=device.type == "cuda",
        )
        self.tables: list[ShardedEmbedding] = []
        self.sparse: RowSparseAdam | None = None
        """The learnt inputs of a typed graph's featureless types, and their optimizer."""
        self.state = RunState(started_at=started_at or time.time())
        self.start_epoch = 0
        self.ddp: nn.Module = self.model
        self.distributed = world_size > 1
        self.static_layout = graph_layout(spec, self.model, device, num_features, self.input_dtype)
        self.graph_step: CapturedStep | None = None
        if self.static_layout is not None:
            assert isinstance(self.model, GraphSAGE)
            self.graph_step = GraphStep(
                self.model,
                self.optimizer,
                self.static_layout,
                num_features=num_features,
                input_dtype=self.input_dtype,
                **self._step_options(),
            )
        captures = self.graph_step is not None and self.graph_step.capture
        self.cuda_memory = CudaMemoryPhases(device, first_steps=WARMUP_STEPS + 1 if captures else 1)

    def _step_options(self) -> StepOptions:
        """What this rank's fixed-shape steps hand on to :class:`CapturedStep`."""
        agree = self.collectives.all_agree
        return StepOptions(
            device=self.device, bf16=self.bf16, world_size=self.world_size, all_agree=agree
        )

    # ------------------------------------------------------------------ checkpoints

    def resume(self) -> int | None:
        """Load the newest checkpoint; returns the epochs it holds (None: none found)."""
        got = restore_run(
            self.run_dir,
            self.model,
            self.optimizer,
            device=self.device,
            started_at=self.state.started_at,
        )
        if got is None:
            return None
        self.start_epoch = min(got.epochs_done, self.spec.training.epochs)
        self.state = got.state
        return got.epochs_done

    def checkpoint(self, epochs_done: int) -> None:
        if self.rank == 0:
            save_run(
                self.run_dir,
                epochs_done,
                self.model,
                self.optimizer,
                self.state,
                job_uid=self.job_uid,
            )

    # ------------------------------------------------------------------ loop

    def autocast(self) -> Any:
        if self.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def fit(self) -> Result:
        if self.graph_step is not None:
            # gradients are all-reduced by the graph step itself (one flat NCCL call)
            self.graph_step.broadcast_parameters()
            log.info(
                "training steps on fixed shapes (%s)",
                "CUDA graph after warm-up" if self.graph_step.capture else "eager",
            )
        elif self.distributed:
            self.ddp = self._wrap_ddp()
        epochs = self.spec.training.epochs
        every = self.spec.training.eval_every
        last_val: float | None = None
        run_report.report_resumed(self)
        for epoch in range(self.start_epoch, epochs):
            stats = self.train_epoch(epoch)
            if every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
                stats.val_accuracy = last_val = self._validate()
            self.state.history.append(stats.__dict__.copy())
            self._report_epoch(stats)
            if (epoch + 1) % self.spec.training.checkpoint_every == 0 or epoch + 1 == epochs:
                self.checkpoint(epoch + 1)
            if self.on_epoch is not None:
                self.on_epoch()
        self.cuda_memory.mark("training")
        return self._final_result(epochs, last_val)

    def _wrap_ddp(self) -> nn.Module:
        ids = [self.device.index] if self.device.type == "cuda" else None
        static = self.STATIC_GRAPH
        return DistributedDataParallel(
            self.model,
            device_ids=ids,
            broadcast_buffers=False,
            gradient_as_bucket_view=static,
            static_graph=static,
            find_unused_parameters=not static,
        )

    def _loader(self, batches: Sequence[Batch], epoch: int | None) -> Prefetcher[Any]:
        """The batches of training epoch ``epoch``, or of an evaluation (None)."""
        if epoch is None:
            return self.pipeline.epoch(batches)
        return self.pipeline.epoch(batches, self.static_layout if self.graph_step else None)

    def _train_step(self, batch: Any) -> Tensor:
        """One optimisation step; returns the loss (on the device)."""
        if self.graph_step is not None:
            return self.graph_step.step(batch)
        loss = self._loss(self._inputs(batch), batch)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        if self.sparse is not None:
            self.sparse.step()  # collective: the row gradients go to their owners
        return loss

    def _loss(self, x: Any, batch: Any) -> Tensor:
        """The step's loss: cross-entropy of the seeds' logits (a link job: its own)."""
        with self.autocast():
            logits = self.ddp(x, batch.hop)
        return F.cross_entropy(logits.float(), batch.y)

    def _epoch_train_ids(self, epoch: int) -> Sequence[Tensor]:
        """The training seeds of ``epoch``, by holder (all of them; a subclass may subset)."""
        return self.train_ids

    def _eval_logits(self, batch: Any) -> Tensor:
        x = self._inputs(batch)
        with self.autocast():
            logits: Tensor = self.model(x, batch.hop)
        return logits

    def _finish_eval(self, num_batches: int) -> None:
        """After this rank's evaluation batches (ranks may have different numbers)."""

    def _job_seeds_per_second(self) -> float:
        seconds = self.state.train_seconds()
        return self.state.seeds() / seconds if seconds > 0 else 0.0

    def train_epoch(self, epoch: int) -> EpochStats:
        return epoch_loop.train_epoch(self, epoch)

    def _moved_bytes(self) -> int:
        """Remote feature bytes this rank's pipeline pulled so far (0 where none move)."""
        return int(getattr(self.pipeline, "moved_bytes", 0))

    def _eager_steps(self) -> int:
        """Steps this rank ran eagerly so far instead of replaying its fixed-shape step (a
        batch over its caps or embedding blocks); 0 where steps have no fixed shapes."""
        return int(getattr(self.graph_step, "oversize", 0))

    @torch.no_grad()
    def evaluate(self, ids_by_holder: list[Tensor], split: str) -> float:
        return epoch_loop.evaluate(self, ids_by_holder, split)

    def _report_epoch(self, stats: EpochStats) -> None:
        run_report.report_epoch(self, stats)

    def _inputs(self, batch: Any) -> Any:
        """The model's input of ``batch``: its features in the training dtype."""
        x: Tensor = batch.x
        return x if x.dtype == self.input_dtype or self.bf16 else x.to(self.input_dtype)

    def _sync(self, what: str = "the training steps") -> None:
        # polled, not a blocking copy: see distgnn_workload.runtime.transfers
        wait_for_stream(self.device, timeout_s=DDP_TIMEOUT_S, what=what)

    def _all_reduce(
        self, values: list[float], op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM
    ) -> list[float]:
        return self.collectives.all_reduce(values, op=op)

    # ------------------------------------------------------------------ the task's

    def _validate(self) -> float:
        """The validation figure between epochs."""
        raise NotImplementedError

    def _validation_fields(self, figure: float | None) -> dict[str, Any]:
        """The progress fields of an epoch's validation figure."""
        raise NotImplementedError

    def _final_result(self, epochs: int, last_val: float | None) -> Result:
        """Evaluate the final model and report it; ``last_val``: the last validation figure."""
        raise NotImplementedError
