"""The CUDA-graph capture and replay of a sampler's fixed-shape run, one for every sampler
(the one-type :class:`~distgnn_workload.sampling.NeighborSampler` and the typed
:class:`~distgnn_workload.sampling.HeteroNeighborSampler`): captured once per
key (a batch capacity, and what else changes the run's shape), replayed for every batch that
fits, and given up for the dynamic execution when a capture fails."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch
from torch import Tensor

from distgnn_workload.sampling.random_stream import RandomStream, reset_default_generator

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)
Out = TypeVar("Out")

CUDA_GRAPH_LOCK = threading.RLock()
"""Held by every CUDA graph capture and replay of this process (the samplers' and the
trainer's step). torch registers the device's default generator with every graph: while one
thread captures, another thread's replay (which advances the registered generators) fails
with "Offset increment outside graph capture", and concurrent captures share the caching
allocator's capture state. A replay only enqueues work, so holding the lock costs little."""


def capture(
    run: Callable[[], T], device: torch.device, generator: torch.Generator
) -> tuple[torch.cuda.CUDAGraph, T]:
    """``run`` warmed up once on a side stream, then captured: the graph, and the outputs a
    replay refills. The graph draws from ``generator``'s state (registered explicitly before
    torch 2.12, implicitly after). The caller holds the process's CUDA-graph lock."""
    stream = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        run()  # warm-up outside the capture
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    register = getattr(graph, "register_generator_state", None)
    if register is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            register(generator)
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
        out = run()
    return graph, out


@dataclass
class CapturedRun(Generic[Out]):
    """One captured run: its graph, the inputs a replay refills, and the outputs it fills."""

    graph: torch.cuda.CUDAGraph
    seeds: Tensor
    """The padded seeds."""
    num_seeds: Tensor
    """How many of them are real (0-d)."""
    out: Out
    extra: Tensor | None = None
    """A further input of the run (a link batch's excluded edge keys, padded)."""


class CapturedSampler(RandomStream, Generic[K, Out]):
    """Mixed into the samplers: their fixed-shape run, captured per key and replayed.

    A sampler provides :meth:`_run_static` (the run, with no host sync) and
    :meth:`_reset_tables` (clears its relabel tables after a failed run), and picks its
    execution with :meth:`_pick_execution`; ``_graphs`` holds the captured runs.
    """

    cuda_graph: bool
    static_shapes: bool
    _graphs: dict[Any, Any]

    def _pick_execution(
        self, static_shapes: bool | None, cuda_graph: bool, *, bounded: bool
    ) -> None:
        """Static shapes (None: on CUDA where every fanout is bounded), captured in CUDA
        graphs where asked for and possible; no run captured yet."""
        if static_shapes is None:
            static_shapes = self.device.type == "cuda" and bounded
        if static_shapes and not bounded:
            raise ValueError("static_shapes needs bounded fanouts: -1 (all neighbours) has none")
        self.static_shapes = static_shapes
        self.cuda_graph = cuda_graph and static_shapes and self.device.type == "cuda"
        self._graphs = {}

    def _run_static(self, key: K, seeds: Tensor, num_seeds: Tensor, extra: Tensor | None) -> Out:
        raise NotImplementedError

    def _reset_tables(self) -> None:
        raise NotImplementedError

    def _replay(self, key: K, padded: Tensor, num_seeds: int, extra: Tensor | None = None) -> Out:
        """The run of ``key`` for ``padded`` seeds, of which ``num_seeds`` are real: captured
        the first time, replayed after."""
        captured: CapturedRun[Out] | None = self._graphs.get(key)
        if captured is None:
            captured = self._capture(key, padded.to(self.device), num_seeds, extra)
            self._graphs[key] = captured
        captured.seeds.copy_(padded)
        captured.num_seeds.fill_(num_seeds)
        if captured.extra is not None and extra is not None:
            captured.extra.copy_(extra)
        with CUDA_GRAPH_LOCK:
            captured.graph.replay()
        return captured.out

    def _capture(
        self, key: K, padded: Tensor, num_seeds: int, extra: Tensor | None
    ) -> CapturedRun[Out]:
        with CUDA_GRAPH_LOCK:
            return self._capture_locked(key, padded, num_seeds, extra)

    def _capture_locked(
        self, key: K, padded: Tensor, num_seeds: int, extra: Tensor | None
    ) -> CapturedRun[Out]:
        seeds = padded.clone()
        owned = None if extra is None else extra.clone()
        count = torch.tensor(num_seeds, dtype=torch.int64, device=self.device)
        graph, out = capture(
            lambda: self._run_static(key, seeds, count, owned), self.device, self.generator
        )
        return CapturedRun(graph=graph, seeds=seeds, num_seeds=count, out=out, extra=owned)

    def _give_up_graphs(self, error: RuntimeError, what: str) -> None:
        """After a failed capture: the dynamic execution from now on, with a fresh generator.

        The padded eager execution launches hundreds of kernels: the exact one is faster. A
        capture that failed midway leaves its generators in capture mode, where any later
        draw raises "Offset increment outside graph capture", so this sampler's generator is
        replaced and the device's default generator (registered with every graph) gets a
        fresh state with the same seed.
        """
        warnings.warn(
            f"CUDA graph capture of {what} failed ({error}); falling back to the dynamic execution",
            stacklevel=3,
        )
        self.cuda_graph = self.static_shapes = False
        self._graphs.clear()
        self._reset_tables()
        self._restart_after_failed_capture()
        if self.device.type == "cuda":
            reset_default_generator(self.device)
