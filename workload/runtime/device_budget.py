"""The GPU budget that a spec's memory setting gives a process on its device:
``samplers.featureMemory`` (a holder's feature table) and ``trainers.embeddingMemory`` (a
trainer's shards of the learnable embeddings). Both follow one rule
(:func:`distgnn_api.feature_memory.feature_budget`), which ``distgnn plan`` shares."""

from __future__ import annotations

import logging

import torch

from distgnn_api.feature_memory import feature_budget
from distgnn_api.kube import AUTO
from distgnn_workload.runtime.distributed_sampler import free_memory

log = logging.getLogger(__name__)


def device_budget(
    value: int | str | None, device: torch.device, other: int, *, field: str
) -> int | None:
    """Bytes the setting ``field`` (of value ``value``) lets this process keep on
    ``device``, past ``other`` bytes it will hold besides; None: no cap (no value, or
    ``auto`` on a CPU)."""
    if value is None or (device.type != "cuda" and value == AUTO):
        return None
    if device.type == "cuda":
        free, total = (int(b) for b in torch.cuda.mem_get_info(device))
    else:  # an explicit budget on a CPU process splits all the same (tests)
        free = total = free_memory(device)
    budget = feature_budget(value, free, total, other, field=field)
    log.info("%s %s: a GPU budget of %.2f GiB", field, value, (budget or 0) / 2**30)
    return budget
