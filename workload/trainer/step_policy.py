"""Whether training steps run as a CUDA graph over fixed shapes, and with which shapes."""

from __future__ import annotations

import logging

import torch
from torch import nn

from distgnn_api.contract import ENV_CUDA_GRAPH as ENV_CUDA_GRAPH
from distgnn_api.contract import WorkloadEnv
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.models.sage import GraphSAGE
from distgnn_workload.sampling import StaticLayout

log = logging.getLogger(__name__)

GRAPH_MEMORY_SHARE = 0.1
"""The fixed-shape inputs of a CUDA-graph step may take at most this share of the GPU."""


def cuda_graph_setting() -> str:
    """:data:`ENV_CUDA_GRAPH`, lower case: 0 runs eager steps even where a CUDA graph could
    run; ``static`` the fixed-shape steps (and a typed worker's static sampler) on a CPU
    too (eagerly: how tests check them without a GPU); unset is 1."""
    return (WorkloadEnv.setting(ENV_CUDA_GRAPH) or "1").lower()


def graph_layout(
    spec: DistGNNJobSpec,
    model: nn.Module,
    device: torch.device,
    num_features: int,
    dtype: torch.dtype,
    *,
    seeds: int | None = None,
) -> StaticLayout | None:
    """The fixed shapes of CUDA-graph training steps, or None where steps stay eager.

    Graph steps need a GPU, GraphSAGE (the model with a fixed-shape forward), bounded
    fanouts, and fixed-shape inputs that fit in a small share of the GPU's memory.
    ``seeds``: seed rows of a full batch (default ``training.batchSize``; a link batch
    seeds both ends of each positive and of its negatives).
    """
    want = cuda_graph_setting()
    if want in ("0", "false", "no") or not isinstance(model, GraphSAGE):
        return None
    if device.type != "cuda" and want != "static":
        return None
    if any(k < 1 for k in spec.model.fanout):
        return None
    layout = StaticLayout(seeds or spec.training.batch_size, tuple(spec.model.fanout))
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
