"""The device of a process and the trainers' DDP process group (NCCL on GPU, gloo on CPU)."""

from __future__ import annotations

import logging
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore

from distgnn_api.contract import ENV_DEVICE, ContractError, WorkloadEnv
from distgnn_workload.runtime.rendezvous import Group

log = logging.getLogger(__name__)

DDP_TIMEOUT_S = 600.0


def pick_device(env: WorkloadEnv, local_rank: int = 0) -> torch.device:
    """``DISTGNN_DEVICE`` (cuda, cuda:N or cpu), else CUDA when available.

    A trainer pod with several processes gives local rank r the r-th visible GPU.
    """
    want = (env.device or "").strip().lower()
    if want == "cpu":
        return torch.device("cpu")
    if want and not want.startswith("cuda"):
        raise ContractError(f"{ENV_DEVICE}={env.device!r} is not cuda, cuda:N or cpu")
    if not torch.cuda.is_available():
        if want:
            raise ContractError(
                f"{ENV_DEVICE}={env.device!r} but no CUDA device is visible to this process; "
                "give the pod a GPU or set it to cpu"
            )
        return torch.device("cpu")
    index = int(want.split(":", 1)[1]) + local_rank if ":" in want else local_rank
    if index >= torch.cuda.device_count():
        raise ContractError(
            f"local rank {local_rank} needs GPU {index} but only {torch.cuda.device_count()} "
            "are visible; give the pod one GPU per training process"
        )
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def init_ddp(group: Group, device: torch.device, *, timeout_s: float = DDP_TIMEOUT_S) -> None:
    """Join the trainers' process group (the samplers take no part)."""
    trainers = group.trainers
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend=backend,
        store=PrefixStore("distgnn/ddp", group.store),
        rank=group.me.rank,
        world_size=len(trainers),
        timeout=timedelta(seconds=timeout_s),
        device_id=device if device.type == "cuda" else None,
    )
    log.info("ddp up: rank %d of %d on %s (%s)", group.me.rank, len(trainers), device, backend)
