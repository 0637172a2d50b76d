"""The CUDA-graph capture of a sampler's fixed-shape run, one for every sampler (the
homogeneous :class:`~distgnn_workload.sampling.NeighborSampler` and the typed
:class:`~distgnn_workload.sampling.hetero_sampler.HeteroNeighborSampler`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


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
