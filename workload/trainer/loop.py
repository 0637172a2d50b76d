"""The training loop of one rank: epochs, evaluation, checkpoints, the result.

Each epoch every rank gets its share of the training seeds
(:mod:`distgnn_workload.runtime.seeds`), with the same number of steps everywhere.
Validation and test accuracy are computed over each rank's share of the split and summed
across ranks. Rank 0 writes a checkpoint every ``training.checkpointEvery`` epochs. The
small per-epoch and per-evaluation figures are reduced over the host-side control group
(:class:`~distgnn_workload.runtime.ddp.Collectives`), never read back from a GPU that waits
for a peer.
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

from distgnn_api.contract import STAGE_EPOCH, STAGE_EVAL, Result, emit_progress, rfc3339_now
from distgnn_api.spec import DistGNNJobSpec, EvaluationKind, EvaluationSpec
from distgnn_workload import evaluation
from distgnn_workload.evaluation.accuracy import SplitRows
from distgnn_workload.loader import MiniBatch, Prefetcher
from distgnn_workload.models import build_model
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.runtime.cuda_memory import CudaMemoryPhases
from distgnn_workload.runtime.ddp import DDP_TIMEOUT_S, Collectives, single_process
from distgnn_workload.runtime.seeds import Batch, eval_batches, train_batches
from distgnn_workload.runtime.status_server import ProgressTracker
from distgnn_workload.runtime.transfers import wait_for_stream
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.trainer.epoch_stats import EpochStats, RunState, announce_epoch
from distgnn_workload.trainer.evaluation import store_inference
from distgnn_workload.trainer.captured_step import WARMUP_STEPS, CapturedStep
from distgnn_workload.trainer.graph_step import GraphStep
from distgnn_workload.trainer.profiler import StepProfiler
from distgnn_workload.trainer.run_checkpoint import restore_run, save_run
from distgnn_workload.trainer.step_policy import graph_layout
from distgnn_workload.trainer.trainer_metrics import TrainerMetrics

log = logging.getLogger(__name__)

EVAL_BATCH_FACTOR = 1
"""Evaluation batches hold this many times the training batch size. Kept at 1: the GPU
sampler pads every batch to the largest it has seen (static shapes, CUDA graphs), so
larger evaluation batches would slow down the training batches after them."""
PROGRESS_EVENTS_PER_EPOCH = 20


class Pipeline(Protocol):
    """What the training loop needs from a data pipeline (its batches: :class:`MiniBatch`,
    or what the subclass's step takes)."""

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[Any]: ...


class Trainer:
    """The training loop of one rank."""

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
                device=device,
                bf16=self.bf16,
                world_size=world_size,
                all_agree=self.collectives.all_agree,
            )
        captures = self.graph_step is not None and self.graph_step.capture
        self.cuda_memory = CudaMemoryPhases(device, first_steps=WARMUP_STEPS + 1 if captures else 1)

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
        if self.tracker is not None and self.state.history:
            h = self.state.history[-1]
            self.tracker.update(
                epoch=self.start_epoch,
                seeds_per_second=self._job_seeds_per_second(),
                loss=h.get("loss"),
                **self._validation_fields(h.get("val_accuracy")),
            )
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

    def _final_result(self, epochs: int, last_val: float | None) -> Result:
        """Evaluate the final model and report it; ``last_val``: the last validation figure."""
        # the final figures, full-neighbourhood or sampled as training.evaluation says
        final = evaluation.final_accuracies(
            self._evaluation_spec,
            sampled=lambda split: self.evaluate(
                self.val_ids if split == "val" else self.test_ids, split
            ),
            full=self._full_evaluation(),
            has_val=self._has_val(),
            last_val=last_val,
        )
        result = Result(
            job_uid=self.job_uid,
            epochs=epochs,
            test_accuracy=final.test,
            test_accuracy_kind=final.test_kind,
            val_accuracy=final.val,
            val_accuracy_kind=final.val_kind,
            seeds_per_second=self._job_seeds_per_second(),
            elapsed_seconds=time.time() - self.state.started_at,
            finished_at=rfc3339_now(),
        )
        if self.tracker is not None:
            self.tracker.update(
                epoch=epochs,
                seeds_per_second=result.seeds_per_second,
                **self.metrics.feature_figures(),
                val_accuracy=final.val,
                val_accuracy_kind=final.val_kind,
                test_accuracy=final.test,
                test_accuracy_kind=final.test_kind,
            )
        return result

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

    @property
    def _evaluation_spec(self) -> EvaluationSpec:
        return self.spec.training.evaluation

    def _loader(self, batches: Sequence[Batch], epoch: int | None) -> Prefetcher[Any]:
        """The batches of training epoch ``epoch``, or of an evaluation (None)."""
        if epoch is None:
            return self.pipeline.epoch(batches)
        return self.pipeline.epoch(batches, self.static_layout if self.graph_step else None)

    def _train_step(self, batch: Any) -> Tensor:
        """One optimisation step; returns the loss (on the device)."""
        if self.graph_step is not None:
            return self.graph_step.step(batch)
        with self.autocast():
            logits = self.ddp(self._input(batch), batch.hop)
        loss = F.cross_entropy(logits.float(), batch.y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        return loss

    def _epoch_train_ids(self, epoch: int) -> Sequence[Tensor]:
        """The training seeds of ``epoch``, by holder (all of them; a subclass may subset)."""
        return self.train_ids

    def _eval_logits(self, batch: Any) -> Tensor:
        with self.autocast():
            logits: Tensor = self.model(self._input(batch), batch.hop)
        return logits

    def _finish_eval(self, num_batches: int) -> None:
        """After this rank's evaluation batches (ranks may have different numbers)."""

    def _job_seeds_per_second(self) -> float:
        seconds = self.state.train_seconds()
        return self.state.seeds() / seconds if seconds > 0 else 0.0

    def train_epoch(self, epoch: int) -> EpochStats:
        spec = self.spec.training
        batches = train_batches(
            self._epoch_train_ids(epoch),
            self.ranks_of_holder,
            self.world_size,
            self.rank,
            spec.batch_size,
            epoch=epoch,
            seed=spec.seed,
        )
        self.ddp.train()
        m = self.metrics
        loss_sum = torch.zeros((), dtype=torch.float32, device=self.device)
        seeds = edges = 0
        host_wait = 0.0
        cuda = self.device.type == "cuda"
        total = len(batches)
        emit_every = max(1, total // PROGRESS_EVENTS_PER_EPOCH)
        moved = self._moved_bytes()
        loader = self._loader(batches, epoch)
        profiler = StepProfiler.create(self.rank, epoch == self.start_epoch)
        self._sync()
        start = prev = time.perf_counter()
        for step, batch in enumerate(loader):
            if profiler is not None:
                profiler.step(step)
            loss = self._train_step(batch)
            if step + 1 == self.cuda_memory.first_steps and epoch == self.start_epoch:
                self.cuda_memory.mark("first_steps")
            loss_sum += loss.detach()
            now = time.perf_counter()
            wait = loader.wait_s[-1] if loader.wait_s else 0.0
            n_seeds, n_edges = batch.num_seeds, batch.hop.num_edges
            seeds += n_seeds
            edges += n_edges
            host_wait += wait
            m.step.observe(now - prev)
            if not cuda:
                m.wait.observe(wait)
            m.seeds.inc(n_seeds)
            m.edges.inc(n_edges)
            m.nodes.inc(batch.num_nodes)
            prev = now
            if self.rank == 0 and ((step + 1) % emit_every == 0 or step + 1 == total):
                emit_progress(
                    STAGE_EPOCH,
                    step + 1,
                    total,
                    epoch=epoch + 1,
                    epochs=self.spec.training.epochs,
                    seeds_per_second=seeds * self.world_size / max(now - start, 1e-9),
                )
        if profiler is not None:
            profiler.close()
        self._sync()
        seconds = time.perf_counter() - start
        # On a GPU the host runs ahead of its stream, so the data wait that counts is how
        # long the training stream stalled for each batch (CUDA events around the wait).
        gpu_waits = loader.gpu_wait_s() if cuda else []
        for w in gpu_waits:
            m.wait.observe(w)
        wait_total = sum(gpu_waits) if cuda else host_wait
        summed = self._all_reduce(
            [
                float(seeds),
                float(edges),
                float(total),
                wait_total,
                host_wait,
                float(loss_sum.item()),
                float(self._moved_bytes() - moved),
            ]
        )
        slowest, minus_fastest = self._all_reduce([seconds, -seconds], op=dist.ReduceOp.MAX)
        g_seeds, g_edges, g_steps, g_wait, g_host_wait, g_loss, g_bytes = summed
        return EpochStats(
            epoch=epoch + 1,
            seeds=int(g_seeds),
            edges=int(g_edges),
            steps=int(g_steps),
            seconds=slowest,
            data_wait_seconds=g_wait / max(self.world_size, 1),
            host_wait_seconds=g_host_wait / max(self.world_size, 1),
            loss=g_loss / max(g_steps, 1.0),
            fastest_rank_seconds=-minus_fastest,
            feature_bytes=int(g_bytes),
        )

    def _moved_bytes(self) -> int:
        """Remote feature bytes this rank's pipeline pulled so far (0 where none move)."""
        return int(getattr(self.pipeline, "moved_bytes", 0))

    @torch.no_grad()
    def evaluate(self, ids_by_holder: list[Tensor], split: str) -> float:
        batches = eval_batches(
            ids_by_holder,
            self.ranks_of_holder,
            self.rank,
            self.spec.training.batch_size * EVAL_BATCH_FACTOR,
        )
        self.model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        count = 0
        total = len(batches)
        for i, batch in enumerate(self._loader(batches, None)):
            logits = self._eval_logits(batch)
            correct += (logits.argmax(dim=-1) == batch.y).sum()
            count += batch.num_seeds
            if self.rank == 0 and (i + 1) % 50 == 0:
                emit_progress(STAGE_EVAL, i + 1, total)
        self._finish_eval(total)
        self._sync(f"the {split} evaluation")
        got, seen = self._all_reduce([float(correct.item()), float(count)])
        accuracy = got / seen if seen else 0.0
        if seen:
            self.metrics.accuracy(split).set(accuracy)
        if self.rank == 0:
            emit_progress(STAGE_EVAL, total, total, None, **{f"{split}_accuracy": accuracy})
        return accuracy

    def _has_val(self) -> bool:
        return sum(v.numel() for v in self.val_ids) > 0

    def _full_evaluation(self) -> evaluation.FullEvaluation:
        return evaluation.full_evaluation(
            self.model, self._inference, rank=self.rank, all_reduce=self._all_reduce
        )

    def _inference(self) -> tuple[evaluation.LayerwiseInference, SplitRows]:
        """This rank's full-neighbourhood inference over every node (its share), and the
        labels and split masks its accuracy counts over."""
        return store_inference(
            rank=self.rank,
            world_size=self.world_size,
            device=self.device,
            bf16=self.bf16,
            partition_dir=self.partition_dir,
        )

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

    def _report_epoch(self, stats: EpochStats) -> None:
        m = self.metrics
        m.epoch.set(stats.epoch)
        m.loss.set(stats.loss)
        job_rate = self._job_seeds_per_second()
        if self.tracker is not None:
            self.tracker.update(
                epoch=stats.epoch,
                seeds_per_second=job_rate,
                loss=stats.loss,
                **self._validation_fields(stats.val_accuracy),
                **m.feature_figures(),
            )
        if self.rank == 0:
            announce_epoch(
                stats,
                epochs=self.spec.training.epochs,
                world_size=self.world_size,
                val_figure=self.VAL_FIGURE,
            )

    def _validation_fields(self, figure: float | None) -> dict[str, Any]:
        """The progress fields of an epoch's validation figure."""
        return {
            "val_accuracy": figure,
            "val_accuracy_kind": self._val_kind if figure is not None else None,
        }

    def _input(self, batch: MiniBatch) -> Tensor:
        x = batch.x
        return x if x.dtype == self.input_dtype or self.bf16 else x.to(self.input_dtype)

    def _sync(self, what: str = "the training steps") -> None:
        # polled, not a blocking copy: see distgnn_workload.runtime.transfers
        wait_for_stream(self.device, timeout_s=DDP_TIMEOUT_S, what=what)

    def _all_reduce(
        self, values: list[float], op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM
    ) -> list[float]:
        return self.collectives.all_reduce(values, op=op)
