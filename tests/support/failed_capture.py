"""A sampler whose CUDA-graph capture fails, as the capture of a busy stream can."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from torch import Tensor

from distgnn_workload.sampling.graph_capture import CapturedSampler

S = TypeVar("S", bound=CapturedSampler[Any, Any])


def make_capture_fail(sampler: S, monkeypatch: pytest.MonkeyPatch) -> S:
    """``sampler`` as on CUDA (its runs captured), with every capture failing."""
    sampler.cuda_graph = True

    def broken_capture(key: object, padded: Tensor, num_seeds: int, extra: object) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(sampler, "_capture", broken_capture)
    return sampler
