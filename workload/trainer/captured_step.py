"""The training step as one CUDA graph replay, over fixed-shape inputs: the capture, the
replay and the gradients' all-reduce of every fixed-shape step (its specialisations, one per
model and task, are in :mod:`.graph_step` and :mod:`.link_graph_step`).

An eager step launches a few hundred kernels from Python (forward on the main thread,
backward on the autograd thread), and with batches of a new size every time cuBLAS picks
its algorithms again: on a GPU the step is bound by the host, not the device. Padded to the
fixed shapes of a :class:`~distgnn_workload.sampling.StaticLayout` (the pipeline pads on its
loader thread), forward and backward are captured once and replayed: per step the host
copies the batch into the static inputs, replays the graph, all-reduces the gradients (one
NCCL call over one flat buffer, summed, with the loss scaled like DDP's mean) and runs the
fused optimizer. Eager steps all-reduce bucket by bucket while the backward runs
(:mod:`.grad_buckets`); ``DISTGNN_OVERLAP_ALLREDUCE=graph`` puts the buckets inside the
graph too (see :data:`ENV_OVERLAP` for the price).

The first steps run the same static computation eagerly (warm-up, as CUDA graph capture
wants), then the graph is captured. If the capture fails on any rank, every rank goes back
to the eager step (the ranks agree on the host, so none waits for the others).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, NotRequired, TypedDict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from distgnn_api.contract import ENV_OVERLAP_ALLREDUCE, WorkloadEnv
from distgnn_workload.loader.streams import SIDE_STREAMS
from distgnn_workload.runtime.transfers import wait_for_event
from distgnn_workload.sampling.neighbor_sampler import CUDA_GRAPH_LOCK, reset_default_generator
from distgnn_workload.trainer.grad_buckets import GradBuckets

ENV_OVERLAP = ENV_OVERLAP_ALLREDUCE
"""How the gradients are all-reduced across ranks:

- ``hooks`` (default): bucket by bucket during the backward of eager steps; after the
  replay, as one flat buffer, for steps replayed from a CUDA graph;
- ``graph``: bucket by bucket inside the captured graph too. The host then waits (polling)
  for each replay to finish before it launches the next: a graph launch whose previous
  replay still runs blocks in the driver, and with the all-reduce inside that replay waiting
  for a peer, every other CUDA call of the process (the loader thread's feature exchange
  with that peer) would wait behind it, for ever;
- ``0``: one flat all-reduce after every step."""


def overlap_mode() -> str:
    """``hooks``, ``graph`` or ``off`` (see :data:`ENV_OVERLAP`)."""
    raw = (WorkloadEnv.setting(ENV_OVERLAP) or "hooks").lower()
    if raw in ("0", "false", "no", "off"):
        return "off"
    if raw == "graph":
        return "graph"
    if raw in ("1", "true", "yes", "hooks"):
        return "hooks"
    raise ValueError(f"{ENV_OVERLAP}={raw!r}: use hooks, graph or 0")


log = logging.getLogger(__name__)


class StepOptions(TypedDict):
    """What every fixed-shape step hands on to :class:`CapturedStep` as it is."""

    device: torch.device
    bf16: bool
    world_size: int
    capture: NotRequired[bool]
    all_agree: NotRequired[Callable[[bool], bool] | None]


WARMUP_STEPS = 3
"""Eager static steps before the capture (CUDA graph capture wants warmed-up kernels)."""


class CapturedStep:
    """Fixed-shape training steps of ``model``, replayed from a CUDA graph after warm-up.

    Subclasses own the fixed-shape inputs: :meth:`_load` copies a batch into them and
    :meth:`_logits` computes the logits of the padded seeds from them; they also set ``y``,
    ``num_seeds`` and ``rows`` (the padded seeds' labels, their real count and ``arange``).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        device: torch.device,
        bf16: bool,
        world_size: int,
        batch_size: int,
        capture: bool = True,
        all_agree: Callable[[bool], bool] | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.device = device
        self.bf16 = bf16
        self.world_size = world_size
        self.all_agree = all_agree
        self.capture = capture and device.type == "cuda"
        self.batch_size = batch_size
        self.y = torch.zeros(batch_size, dtype=torch.int64, device=device)
        self.num_seeds = torch.ones((), dtype=torch.int64, device=device)
        self.rows = torch.arange(batch_size, device=device)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buckets: GradBuckets | None = None
        mode = overlap_mode()
        self.graph_all_reduce = mode == "graph" and self.capture
        if world_size > 1 and (self.graph_all_reduce or (mode == "hooks" and not self.capture)):
            self.buckets = GradBuckets(self.params, device)
        self._replayed: torch.cuda.Event | None = None
        self.graph: torch.cuda.CUDAGraph | None = None
        self.loss: Tensor | None = None
        self.steps = 0
        self.failed = False

    # ------------------------------------------------------------------ the inputs

    def _load(self, batch: Any) -> None:
        """Copy ``batch`` into the fixed-shape inputs (and ``y``, ``num_seeds``)."""
        raise NotImplementedError

    def _logits(self) -> Tensor:
        """The logits of the padded seeds (``batch_size`` rows first) from the inputs."""
        raise NotImplementedError

    def _extra_grads(self) -> list[Tensor]:
        """Leaf inputs (not parameters) whose gradients each step computes, besides the
        parameters'; their ``grad`` is reset with the parameters'."""
        return []

    # ------------------------------------------------------------------ the step

    def step(self, batch: Any) -> Tensor:
        """One training step on ``batch``; returns its loss."""
        if self._replayed is not None:
            # never block in CUDA here: see ENV_OVERLAP ``graph``
            wait_for_event(self._replayed, timeout_s=None, what="the last replay")
        self._load(batch)
        if self.graph is not None:
            with CUDA_GRAPH_LOCK:
                self.graph.replay()
            if self.graph_all_reduce:
                self._replayed = torch.cuda.Event()  # type: ignore[no-untyped-call]
                self._replayed.record(torch.cuda.current_stream(self.device))
            assert self.loss is not None
            loss = self.loss
        elif self.capture and self.steps >= WARMUP_STEPS:
            loss = self._capture_and_replay()
        else:
            loss = self._eager()
        if self.buckets is None:
            self._all_reduce_grads()
        self.optimizer.step()
        self.steps += 1
        return loss

    def _autocast(self) -> Any:
        if self.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False)
        return nullcontext()

    def _loss(self) -> Tensor:
        """The batch's loss from the fixed inputs: cross-entropy over the real seeds."""
        with self._autocast():
            logits = self._logits()
        batch = self.batch_size
        per_seed = F.cross_entropy(logits[:batch].float(), self.y, reduction="none")
        real = (self.rows < self.num_seeds).to(per_seed.dtype)
        return (per_seed * real).sum() / self.num_seeds.clamp(min=1).to(per_seed.dtype)

    def _forward_backward(self) -> Tensor:
        loss = self._loss()
        # the all-reduce sums the ranks' gradients: scale by 1/world like DDP's mean
        (loss / self.world_size).backward()  # type: ignore[no-untyped-call]
        return loss.detach()

    def _zero_grad(self) -> None:
        if self.buckets is not None:
            self.buckets.begin()  # the gradients are views of its flat buffer: keep them
        else:
            self.optimizer.zero_grad(set_to_none=True)
        for leaf in self._extra_grads():
            leaf.grad = None

    def _reduced_forward_backward(self) -> Tensor:
        self._zero_grad()
        loss = self._forward_backward()
        if self.buckets is not None:
            self.buckets.finish()
        return loss

    def _eager(self) -> Tensor:
        if self.device.type != "cuda":
            return self._reduced_forward_backward()
        # warm-up and oversize steps reuse one stream (and the blocks cached for it)
        with SIDE_STREAMS.lease(self.device) as side:
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                loss = self._reduced_forward_backward()
            torch.cuda.current_stream(self.device).wait_stream(side)
        return loss

    def _capture_and_replay(self) -> Tensor:
        graph = self._capture()
        if graph is None and self.buckets is not None:
            # NCCL inside the graph failed here: the all-reduce after the replay instead
            log.warning("capturing the all-reduce in the step failed; all-reducing after it")
            self.buckets.active = False
            for p in self.params:
                p.grad = None
            self.buckets = None
            graph = self._capture()
        if graph is None:
            self.failed = True
            self.capture = False
            self.graph = None
            self.loss = None
            return self._eager()
        self.graph = graph
        log.info(
            "training step captured in a CUDA graph after %d eager steps%s",
            self.steps,
            f" (all-reduce in {self.buckets.num_buckets} buckets inside it)"
            if self.buckets
            else "",
        )
        with CUDA_GRAPH_LOCK:
            graph.replay()
        assert self.loss is not None
        return self.loss

    def _capture(self) -> torch.cuda.CUDAGraph | None:
        """Capture the step; None (on every rank) if the capture failed on any rank."""
        graph = torch.cuda.CUDAGraph()
        error: str | None = None
        with CUDA_GRAPH_LOCK:
            try:
                if self.buckets is None:
                    # the gradients come out of the graph's memory, refilled by every replay
                    self.optimizer.zero_grad(set_to_none=True)
                for leaf in self._extra_grads():
                    leaf.grad = None
                with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                    # with buckets: zeroing, backward and the overlapped all-reduce in one replay
                    self.loss = self._reduced_forward_backward()
            except RuntimeError as err:
                error = f"{type(err).__name__}: {err}"
                reset_default_generator(self.device)  # dropout draws from it
        if not self._all_ranks_ok(error is None):
            log.warning(
                "CUDA graph capture of the training step failed (%s)", error or "on another rank"
            )
            return None
        return graph

    # ------------------------------------------------------------------ ranks

    def _all_ranks_ok(self, ok: bool) -> bool:
        if self.world_size == 1:
            return ok
        if self.all_agree is not None:  # on the host: no CUDA copy waits for a peer
            return self.all_agree(ok)
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    def _all_reduce_grads(self) -> None:
        if self.world_size == 1:
            return
        grads = [p.grad for p in self.params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        parts = torch.split(flat, [g.numel() for g in grads])
        torch._foreach_copy_(grads, [part.view_as(g) for part, g in zip(parts, grads, strict=True)])

    def broadcast_parameters(self) -> None:
        """Start every rank from rank 0's parameters (what DDP does when it wraps a model)."""
        if self.world_size == 1:
            return
        with torch.no_grad():
            for p in self.model.parameters():
                dist.broadcast(p.data, src=0)
