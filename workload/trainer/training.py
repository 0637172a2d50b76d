"""One training process: rendezvous, data pipeline, DDP training, evaluation, checkpoints.

Global rank = trainer pod rank x processes per pod + local rank. Each epoch every rank gets
its share of the training seeds (:mod:`distgnn_workload.runtime.seeds`), with the same
number of steps everywhere. Validation and test accuracy are computed over each rank's
share of the split and summed across ranks. Rank 0 writes a checkpoint every
``training.checkpointEvery`` epochs and, at the end, ``result.json``.
"""

from __future__ import annotations

import gc
import gzip
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
import torch.nn.functional as F
from torch import Tensor, nn
from torch.futures import Future
from torch.nn.parallel import DistributedDataParallel

from distgnn_api.contract import (
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    STAGE_EPOCH,
    STAGE_EVAL,
    Result,
    WorkloadEnv,
    dump_json,
    emit_progress,
    rfc3339_now,
)
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload import metrics
from distgnn_workload.loader import MiniBatch, Prefetcher
from distgnn_workload.models import build_model
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime.batches import (
    LOOKAHEAD,
    LocalPipeline,
    RemotePipeline,
    RequestInto,
    WireBatch,
    WireMeta,
    batch_slot_spec,
)
from distgnn_workload.runtime.checkpoint import load_latest, save_checkpoint
from distgnn_workload.runtime.ddp import (
    DDP_TIMEOUT_S,
    Collectives,
    init_ddp,
    pick_device,
    single_process,
)
from distgnn_workload.runtime.features import HolderLayout, split_ids
from distgnn_workload.runtime.lifecycle import (
    BadInputError,
    finished_result,
    load_config,
    write_result,
)
from distgnn_workload.runtime.rendezvous import StoreWatchdog, rendezvous
from distgnn_workload.runtime.seeds import Batch, eval_batches, holder_ranks, train_batches
from distgnn_workload.runtime.shared_slots import SlotReader
from distgnn_workload.runtime.shutdown import leave, mark_finished
from distgnn_workload.runtime.status_server import ProgressTracker, StatusServer
from distgnn_workload.runtime.transfers import wait_for_stream
from distgnn_workload.sampler.server import serve_batch, serve_batch_into
from distgnn_workload.sampling import StaticLayout
from distgnn_workload.trainer.graph_step import GraphStep

log = logging.getLogger(__name__)

JOB_CONFIG_COPY = "job.json"
STATS_FILE = "training_stats.json"
"""Per-epoch figures summed over ranks (seeds, edges, seconds, data wait), written at the end."""
EVAL_BATCH_FACTOR = 1
"""Evaluation batches hold this many times the training batch size. Kept at 1: the GPU
sampler pads every batch to the largest it has seen (static shapes, CUDA graphs), so
larger evaluation batches would slow down the training batches after them."""
PROGRESS_EVENTS_PER_EPOCH = 20
ENV_PROFILE_DIR = "DISTGNN_PROFILE_DIR"  # set: rank 0 profiles some steps of its first epoch
PROFILE_STEPS = (20, 40)
"""Steps [a, b) of the first epoch that a profiling rank 0 records."""
ENV_CUDA_GRAPH = "DISTGNN_CUDA_GRAPH"
"""0: eager steps even where a CUDA graph could run; ``static``: the fixed-shape steps on a
CPU too (eagerly: how tests check them without a GPU)."""
GRAPH_MEMORY_SHARE = 0.1
"""The fixed-shape inputs of a CUDA-graph step may take at most this share of the GPU."""


class Pipeline(Protocol):
    """What the training loop needs from a data pipeline."""

    def epoch(
        self, batches: Sequence[Batch], static: StaticLayout | None = None
    ) -> Prefetcher[MiniBatch]: ...


@dataclass
class EpochStats:
    """One epoch's figures, summed over every rank."""

    epoch: int
    seeds: int
    edges: int
    steps: int
    seconds: float
    data_wait_seconds: float
    """Mean over ranks of the time the training step waited for data (GPU stream stall on
    GPUs, host wait on CPU)."""
    host_wait_seconds: float
    """Mean over ranks of the time the host waited for the next mini-batch."""
    loss: float
    val_accuracy: float | None = None
    fastest_rank_seconds: float | None = None
    """The epoch time of the fastest rank (``seconds`` is the slowest's)."""

    @property
    def seeds_per_second(self) -> float:
        return self.seeds / self.seconds if self.seconds > 0 else 0.0


@dataclass
class RunState:
    """What survives a restart through the checkpoint."""

    started_at: float = field(default_factory=time.time)
    history: list[dict[str, Any]] = field(default_factory=list)

    def train_seconds(self) -> float:
        return sum(float(h["seconds"]) for h in self.history)

    def seeds(self) -> int:
        return sum(int(h["seeds"]) for h in self.history)


class TrainerMetrics:
    """The trainer's Prometheus series for one rank."""

    def __init__(self, rank: int) -> None:
        label = str(rank)
        self.seeds = metrics.TRAINER_SEEDS.labels(label)
        self.edges = metrics.TRAINER_SAMPLED_EDGES.labels(label)
        self.nodes = metrics.TRAINER_SAMPLED_NODES.labels(label)
        self.step = metrics.TRAINER_STEP_SECONDS.labels(label)
        self.wait = metrics.TRAINER_DATA_WAIT_SECONDS.labels(label)
        self.epoch = metrics.TRAINER_EPOCH.labels(label)
        self.loss = metrics.TRAINER_LOSS.labels(label)
        self.val = metrics.TRAINER_ACCURACY.labels(label, "val")
        self.test = metrics.TRAINER_ACCURACY.labels(label, "test")
        self.remote_bytes = metrics.TRAINER_REMOTE_FEATURE_BYTES.labels(label)
        self.cache_hits = metrics.TRAINER_CACHE_HITS.labels(label)
        self.cache_lookups = metrics.TRAINER_CACHE_LOOKUPS.labels(label)


class Trainer:
    """The training loop of one rank."""

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
        self.model: nn.Module = build_model(spec.model, num_features, num_classes).to(device)
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
        self.graph_step: GraphStep | None = None
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

    # ------------------------------------------------------------------ checkpoints

    def resume(self) -> None:
        ckpt = load_latest(self.run_dir, map_location=self.device)
        if ckpt is None:
            return
        try:
            self.model.load_state_dict(ckpt.state["model"])
            self.optimizer.load_state_dict(ckpt.state["optimizer"])
        except (KeyError, RuntimeError, ValueError) as err:
            raise BadInputError(
                f"checkpoint {ckpt.path} does not fit this job's model ({err}); the job spec "
                "changed since it was written: move the run's checkpoints away to start over"
            ) from None
        self.start_epoch = min(ckpt.epoch, self.spec.training.epochs)
        self.state = RunState(
            started_at=float(ckpt.state.get("started_at", self.state.started_at)),
            history=list(ckpt.state.get("history", [])),
        )
        log.info("resumed from %s: %d epochs done", ckpt.path.name, ckpt.epoch)

    def checkpoint(self, epochs_done: int) -> None:
        if self.rank != 0:
            return
        path = save_checkpoint(
            self.run_dir,
            epochs_done,
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "started_at": self.state.started_at,
                "history": self.state.history,
                "job_uid": self.job_uid,
            },
        )
        log.info("checkpoint %s written", path.name)

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
            ids = [self.device.index] if self.device.type == "cuda" else None
            # gradients live in DDP's buckets (no copies in and out each step); every
            # parameter is used every step, so the graph is static
            self.ddp = DistributedDataParallel(
                self.model,
                device_ids=ids,
                broadcast_buffers=False,
                gradient_as_bucket_view=True,
                static_graph=True,
            )
        epochs = self.spec.training.epochs
        every = self.spec.training.eval_every
        last_val: float | None = None
        if self.tracker is not None and self.state.history:
            h = self.state.history[-1]
            self.tracker.update(
                epoch=self.start_epoch,
                seeds_per_second=self._job_seeds_per_second(),
                loss=h.get("loss"),
                val_accuracy=h.get("val_accuracy"),
            )
        for epoch in range(self.start_epoch, epochs):
            stats = self.train_epoch(epoch)
            if every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
                stats.val_accuracy = last_val = self.evaluate(self.val_ids, "val")
            self.state.history.append(stats.__dict__.copy())
            self._report_epoch(stats)
            if (epoch + 1) % self.spec.training.checkpoint_every == 0 or epoch + 1 == epochs:
                self.checkpoint(epoch + 1)
            if self.on_epoch is not None:
                self.on_epoch()
        val = (
            self.evaluate(self.val_ids, "val") if sum(v.numel() for v in self.val_ids) else last_val
        )
        test = self.evaluate(self.test_ids, "test")
        result = Result(
            job_uid=self.job_uid,
            epochs=epochs,
            test_accuracy=test,
            val_accuracy=val,
            seeds_per_second=self._job_seeds_per_second(),
            elapsed_seconds=time.time() - self.state.started_at,
            finished_at=rfc3339_now(),
        )
        if self.tracker is not None:
            self.tracker.update(
                epoch=epochs,
                seeds_per_second=result.seeds_per_second,
                val_accuracy=val,
                test_accuracy=test,
            )
        return result

    def _job_seeds_per_second(self) -> float:
        seconds = self.state.train_seconds()
        return self.state.seeds() / seconds if seconds > 0 else 0.0

    def train_epoch(self, epoch: int) -> EpochStats:
        spec = self.spec.training
        batches = train_batches(
            self.train_ids,
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
        graph_step = self.graph_step
        loader = self.pipeline.epoch(batches, self.static_layout if graph_step else None)
        profiler = _StepProfiler.create(self.rank, epoch == self.start_epoch)
        self._sync()
        start = prev = time.perf_counter()
        for step, batch in enumerate(loader):
            if profiler is not None:
                profiler.step(step)
            if graph_step is not None:
                loss = graph_step.step(batch)
            else:
                with self.autocast():
                    logits = self.ddp(self._input(batch), batch.hop)
                loss = F.cross_entropy(logits.float(), batch.y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()  # type: ignore[no-untyped-call]
                self.optimizer.step()
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
            m.nodes.inc(batch.hop.num_nodes)
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
            ]
        )
        slowest, minus_fastest = self._all_reduce([seconds, -seconds], op=dist.ReduceOp.MAX)
        g_seeds, g_edges, g_steps, g_wait, g_host_wait, g_loss = summed
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
        )

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
        for i, batch in enumerate(self.pipeline.epoch(batches)):
            with self.autocast():
                logits = self.model(self._input(batch), batch.hop)
            correct += (logits.argmax(dim=-1) == batch.y).sum()
            count += batch.num_seeds
            if self.rank == 0 and (i + 1) % 50 == 0:
                emit_progress(STAGE_EVAL, i + 1, total)
        self._sync(f"the {split} evaluation")
        got, seen = self._all_reduce([float(correct.item()), float(count)])
        accuracy = got / seen if seen else 0.0
        (self.metrics.val if split == "val" else self.metrics.test).set(accuracy)
        if self.rank == 0:
            emit_progress(STAGE_EVAL, total, total, None, **{f"{split}_accuracy": accuracy})
        return accuracy

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
                val_accuracy=stats.val_accuracy,
            )
        if self.rank == 0:
            figures: dict[str, float] = {
                "epoch": stats.epoch,
                "epochs": self.spec.training.epochs,
                "seeds_per_second": stats.seeds_per_second,
                "loss": stats.loss,
                "data_wait_share": stats.data_wait_seconds / max(stats.seconds, 1e-9),
            }
            if stats.val_accuracy is not None:
                figures["val_accuracy"] = stats.val_accuracy
            steps = stats.steps // max(self.world_size, 1)
            emit_progress(STAGE_EPOCH, steps, steps, None, **figures)
            log.info(
                "epoch %d: loss %.4f, %.0f seeds/s, %.0f edges/s, data wait %.1f%%%s",
                stats.epoch,
                stats.loss,
                stats.seeds_per_second,
                stats.edges / max(stats.seconds, 1e-9),
                100 * stats.data_wait_seconds / max(stats.seconds, 1e-9),
                "" if stats.val_accuracy is None else f", val {stats.val_accuracy:.4f}",
            )

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


def graph_layout(
    spec: DistGNNJobSpec,
    model: nn.Module,
    device: torch.device,
    num_features: int,
    dtype: torch.dtype,
) -> StaticLayout | None:
    """The fixed shapes of CUDA-graph training steps, or None where steps stay eager.

    Graph steps need a GPU, GraphSAGE (the model with a fixed-shape forward), bounded
    fanouts, and fixed-shape inputs that fit in a small share of the GPU's memory.
    """
    want = os.environ.get(ENV_CUDA_GRAPH, "1").strip().lower()
    if want in ("0", "false", "no") or not isinstance(model, GraphSAGE):
        return None
    if device.type != "cuda" and want != "static":
        return None
    if any(k < 1 for k in spec.model.fanout):
        return None
    layout = StaticLayout(spec.training.batch_size, tuple(spec.model.fanout))
    element = torch.tensor([], dtype=dtype).element_size()
    needed = (layout.node_cap + 1) * num_features * element + 8 * sum(layout.index_sizes())
    if device.type != "cuda":
        return layout
    total = torch.cuda.get_device_properties(device).total_memory
    if needed > GRAPH_MEMORY_SHARE * total:
        log.info(
            "training steps stay eager: fixed-shape inputs would take %.1f GiB", needed / 2**30
        )
        return None
    return layout


class _StepProfiler:
    """torch.profiler over a few training steps; writes a table to ``DISTGNN_PROFILE_DIR``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.profile: torch.profiler.profile | None = None

    @classmethod
    def create(cls, rank: int, first_epoch: bool) -> _StepProfiler | None:
        folder = os.environ.get(ENV_PROFILE_DIR)
        return cls(Path(folder)) if folder and rank == 0 and first_epoch else None

    def step(self, step: int) -> None:
        first, last = PROFILE_STEPS
        if step == first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profile = torch.profiler.profile(activities=activities)
            self.profile.__enter__()  # type: ignore[no-untyped-call]
        elif step == last:
            self.close()

    def close(self) -> None:
        if self.profile is None:
            return
        prof, self.profile = self.profile, None
        prof.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        self.folder.mkdir(parents=True, exist_ok=True)
        averages = prof.key_averages()
        cuda = torch.cuda.is_available()
        steps = PROFILE_STEPS[1] - PROFILE_STEPS[0]
        text = f"steps {PROFILE_STEPS[0]}..{PROFILE_STEPS[1]} ({steps} steps)\n"
        if cuda:
            text += "by self CUDA time\n"
            text += averages.table(sort_by="self_cuda_time_total", row_limit=30)
        text += "\nby self CPU time\n"
        text += averages.table(sort_by="self_cpu_time_total", row_limit=30)
        (self.folder / "profile-trainer-0.txt").write_text(text)
        trace = self.folder / "trace-trainer-0.json"
        prof.export_chrome_trace(str(trace))
        with trace.open("rb") as src, gzip.open(f"{trace}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        trace.unlink()


# --------------------------------------------------------------------------- the process


def _sampler_request(holder: int, seeds: Tensor) -> Future[WireBatch]:
    fut: Future[WireBatch] = rpc.rpc_async(f"sampler-{holder}", serve_batch, args=(seeds,))
    return fut


def _sampler_slots(
    spec: DistGNNJobSpec,
    num_samplers: int,
    me: str,
    num_features: int,
    device: torch.device,
) -> dict[int, SlotReader]:
    """Shared slots in every sampler server on this host, for its mini-batches."""
    if any(k < 1 for k in spec.model.fanout):
        return {}  # no bound on a batch's size: batches come over RPC
    layout = StaticLayout(spec.training.batch_size, tuple(spec.model.fanout))
    dtype = torch.bfloat16 if spec.training.bf16 else torch.float32
    slot_spec = batch_slot_spec(layout, num_features, dtype)
    count = spec.samplers.concurrency + 1
    readers = {}
    for h in range(num_samplers):
        reader = SlotReader.attach(f"sampler-{h}", me, slot_spec, count, device)
        if reader is not None:
            readers[h] = reader
    return readers


def _sampler_request_into(me: str) -> RequestInto:
    def request(holder: int, slot: int, seeds: Tensor) -> Future[WireMeta]:
        fut: Future[WireMeta] = rpc.rpc_async(
            f"sampler-{holder}", serve_batch_into, args=(me, slot, seeds)
        )
        return fut

    return request


def run(
    env: WorkloadEnv,
    local_rank: int = 0,
    *,
    progress_file: Path | None = None,
    serve_status: bool = True,
) -> int:
    """Run one training process to completion; returns the exit code."""
    started_at = time.time()
    config = load_config(env)
    if finished_result(env.run_dir, env.job_uid) is not None:
        log.info("the job's result exists: training is complete")
        return EXIT_OK
    spec = config.spec
    device = pick_device(env, local_rank)
    ppp = env.procs_per_pod
    rank = env.rank * ppp + local_rank
    world = env.num_trainers * ppp
    tracker = ProgressTracker(spec.training.epochs, mirror=progress_file)
    if serve_status:
        StatusServer(env.metrics_port, progress=tracker).start()
    store = PartitionStore.open(env.partition_dir)
    num_holders = env.num_trainers if env.worker_mode else env.num_samplers
    holders.check_store(store, spec, num_holders)
    if rank == 0:
        env.run_dir.mkdir(parents=True, exist_ok=True)
        copy = env.run_dir / JOB_CONFIG_COPY
        if not copy.exists():
            dump_json(copy, config)
    state = (
        holders.load(store, spec, env.rank, env.num_trainers, device) if env.worker_mode else None
    )

    group = rendezvous(env, local_rank=local_rank, device=str(device))
    watchdog: StoreWatchdog | None = None
    if rank != 0:

        def on_lost(reason: str) -> None:
            done = finished_result(env.run_dir, env.job_uid) is not None
            if not done:
                log.error("%s; exiting so that the job restarts together", reason)
            logging.shutdown()
            os._exit(EXIT_OK if done else EXIT_INTERNAL_ERROR)

        watchdog = StoreWatchdog(group, on_lost).start()
    collectives = init_ddp(group, device) if world > 1 else single_process()
    ctx = rpc_runtime.init_rpc(group, device, num_worker_threads=16)

    layout = HolderLayout.from_store(store, num_holders)
    pipeline: LocalPipeline | RemotePipeline
    remote_stats: Callable[[], None] | None = None
    m = TrainerMetrics(rank)
    if state is not None:
        holder = holders.connect(
            state,
            store,
            spec,
            ctx,
            lambda h: f"trainer-{h * ppp + local_rank}",
            seed=spec.training.seed * 1_000 + rank,
            slots_per_peer=LOOKAHEAD + 2,
        )
        pipeline = LocalPipeline(
            holder.new_sampler(spec.training.seed * 1_000 + rank),
            holder.features,
            state.labels,
            device=device,
            prefetch=spec.trainers.prefetch,
        )

        def flush_feature_stats() -> None:
            lookups, hits, fetched = holder.features.stats.take()
            m.cache_lookups.inc(lookups)
            m.cache_hits.inc(hits)
            m.remote_bytes.inc(fetched)

        remote_stats = flush_feature_stats
    else:

        def on_batch(wire: WireBatch) -> None:
            x = wire[3]
            m.remote_bytes.inc(x.numel() * x.element_size())

        def on_slot_batch(batch: MiniBatch) -> None:
            m.remote_bytes.inc(batch.x.numel() * batch.x.element_size())

        me = group.me.name
        pipeline = RemotePipeline(
            _sampler_request,
            device=device,
            prefetch=spec.trainers.prefetch,
            concurrency=spec.samplers.concurrency,
            on_batch=on_batch,
            readers=_sampler_slots(spec, num_holders, me, store.meta.num_features, device),
            request_into=_sampler_request_into(me),
            on_slot_batch=on_slot_batch,
        )
    ranks_of = holder_ranks(num_holders, world, worker_mode=env.worker_mode, procs_per_pod=ppp)
    trainer = Trainer(
        spec,
        rank=rank,
        world_size=world,
        device=device,
        pipeline=pipeline,
        train_ids=split_ids(store, layout, "train"),
        val_ids=split_ids(store, layout, "val"),
        test_ids=split_ids(store, layout, "test"),
        ranks_of_holder=ranks_of,
        collectives=collectives,
        num_features=store.meta.num_features,
        num_classes=store.meta.num_classes,
        run_dir=env.run_dir,
        job_uid=env.job_uid,
        tracker=tracker,
        on_epoch=remote_stats,
        started_at=started_at,
    )
    trainer.resume()
    if isinstance(pipeline, LocalPipeline):
        # capture the sampler's CUDA graph here rather than on the loader thread mid-epoch
        pipeline.sampler.prepare(spec.training.batch_size)
    # what exists now lives to the end: keep it out of the collector's full passes
    gc.collect()
    gc.freeze()
    collectives.barrier(env.rendezvous_timeout_s, "start of training")
    result = trainer.fit()
    if rank == 0:
        dump_json(env.run_dir / STATS_FILE, {"world_size": world, "epochs": trainer.state.history})
        path = write_result(env.run_dir, result)
        log.info(
            "done: test accuracy %.4f, %.0f seeds/s; wrote %s",
            result.test_accuracy,
            result.seeds_per_second,
            path,
        )
    mark_finished(group)
    leave(group, timeout_s=env.shutdown_timeout_s)
    if watchdog is not None:
        watchdog.stop()
    return EXIT_OK
