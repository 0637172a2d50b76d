"""The batches of one rank through the model: a training epoch and a sampled evaluation.

Each epoch every rank gets its share of the training seeds
(:mod:`distgnn_workload.runtime.seeds`), with the same number of steps everywhere; the
steps are the trainer's (:meth:`~distgnn_workload.trainer.rank_loop.RankLoop._train_step`, a
CUDA-graph replay where it can). Validation and test accuracy are computed over each rank's
share of the split and summed across ranks. The small per-epoch and per-evaluation figures
are reduced over the host-side control group
(:class:`~distgnn_workload.runtime.ddp.Collectives`), never read back from a GPU that waits
for a peer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor

from distgnn_api.contract import STAGE_EPOCH, STAGE_EVAL, emit_progress
from distgnn_workload.runtime.seeds import eval_batches, train_batches
from distgnn_workload.trainer.epoch_stats import EpochStats
from distgnn_workload.trainer.profiler import StepProfiler

if TYPE_CHECKING:
    from distgnn_workload.trainer.rank_loop import RankLoop

EVAL_BATCH_FACTOR = 1
"""Evaluation batches hold this many times the training batch size. Kept at 1: the GPU
sampler pads every batch to the largest it has seen (static shapes, CUDA graphs), so
larger evaluation batches would slow down the training batches after them."""
PROGRESS_EVENTS_PER_EPOCH = 20


def train_epoch(t: RankLoop, epoch: int) -> EpochStats:
    """One training epoch of the rank's share of the seeds; the figures summed over ranks."""
    spec = t.spec.training
    batches = train_batches(
        t._epoch_train_ids(epoch),
        t.ranks_of_holder,
        t.world_size,
        t.rank,
        spec.batch_size,
        epoch=epoch,
        seed=spec.seed,
    )
    t.ddp.train()
    m = t.metrics
    loss_sum = torch.zeros((), dtype=torch.float32, device=t.device)
    seeds = edges = 0
    host_wait = 0.0
    cuda = t.device.type == "cuda"
    total = len(batches)
    emit_every = max(1, total // PROGRESS_EVENTS_PER_EPOCH)
    moved = t._moved_bytes()
    eager = t._eager_steps()
    loader = t._loader(batches, epoch)
    profiler = StepProfiler.create(t.rank, epoch == t.start_epoch)
    t._sync()
    start = prev = time.perf_counter()
    for step, batch in enumerate(loader):
        if profiler is not None:
            profiler.step(step)
        loss = t._train_step(batch)
        if step + 1 == t.cuda_memory.first_steps and epoch == t.start_epoch:
            t.cuda_memory.mark("first_steps")
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
        if t.rank == 0 and ((step + 1) % emit_every == 0 or step + 1 == total):
            emit_progress(
                STAGE_EPOCH,
                step + 1,
                total,
                epoch=epoch + 1,
                epochs=t.spec.training.epochs,
                seeds_per_second=seeds * t.world_size / max(now - start, 1e-9),
            )
    if profiler is not None:
        profiler.close()
    t._sync()
    seconds = time.perf_counter() - start
    # On a GPU the host runs ahead of its stream, so the data wait that counts is how
    # long the training stream stalled for each batch (CUDA events around the wait).
    gpu_waits = loader.gpu_wait_s() if cuda else []
    for w in gpu_waits:
        m.wait.observe(w)
    wait_total = sum(gpu_waits) if cuda else host_wait
    summed = t._all_reduce(
        [
            float(seeds),
            float(edges),
            float(total),
            wait_total,
            host_wait,
            float(loss_sum.item()),
            float(t._moved_bytes() - moved),
            float(t._eager_steps() - eager),
        ]
    )
    slowest, minus_fastest = t._all_reduce([seconds, -seconds], op=dist.ReduceOp.MAX)
    g_seeds, g_edges, g_steps, g_wait, g_host_wait, g_loss, g_bytes, g_eager = summed
    return EpochStats(
        epoch=epoch + 1,
        seeds=int(g_seeds),
        edges=int(g_edges),
        steps=int(g_steps),
        seconds=slowest,
        data_wait_seconds=g_wait / max(t.world_size, 1),
        host_wait_seconds=g_host_wait / max(t.world_size, 1),
        loss=g_loss / max(g_steps, 1.0),
        fastest_rank_seconds=-minus_fastest,
        feature_bytes=int(g_bytes),
        eager_steps=int(g_eager),
    )


def evaluate(t: RankLoop, ids_by_holder: list[Tensor], split: str) -> float:
    """Sampled accuracy over ``split`` (this rank's share of ``ids_by_holder``), over all ranks."""
    batches = eval_batches(
        ids_by_holder,
        t.ranks_of_holder,
        t.rank,
        t.spec.training.batch_size * EVAL_BATCH_FACTOR,
    )
    t.model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=t.device)
    count = 0
    total = len(batches)
    for i, batch in enumerate(t._loader(batches, None)):
        logits = t._eval_logits(batch)
        correct += (logits.argmax(dim=-1) == batch.y).sum()
        count += batch.num_seeds
        if t.rank == 0 and (i + 1) % 50 == 0:
            emit_progress(STAGE_EVAL, i + 1, total)
    t._finish_eval(total)
    t._sync(f"the {split} evaluation")
    got, seen = t._all_reduce([float(correct.item()), float(count)])
    accuracy = got / seen if seen else 0.0
    if seen:
        t.metrics.accuracy(split).set(accuracy)
    if t.rank == 0:
        emit_progress(STAGE_EVAL, total, total, None, **{f"{split}_accuracy": accuracy})
    return accuracy
