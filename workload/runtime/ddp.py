"""The device of a process and the trainers' process groups.

Gradients go over NCCL on GPUs (gloo on CPU). The small control values (epoch figures,
evaluation counts, whether a graph capture worked, the end-of-training barrier) go over a
second, host-side gloo group: a rank that waits there for a slower peer waits on a socket,
never inside a CUDA copy (see :mod:`distgnn_workload.runtime.transfers` for why that
matters), and a barrier that times out names the ranks that never arrived.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
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


class Collectives:
    """The trainers' control collectives on the host, naming peers when they fail.

    With one trainer every call returns at once.
    """

    def __init__(
        self, rank: int, world_size: int, names: list[str], group: dist.ProcessGroup | None
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.names = names
        self.group = group

    def all_reduce(
        self, values: list[float], op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM
    ) -> list[float]:
        """Element-wise reduction of ``values`` over the trainers (float64 on the host)."""
        if self.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=op, group=self.group)
        return [float(v) for v in t.tolist()]

    def all_gather(self, values: Tensor) -> list[Tensor]:
        """Every trainer's ``values`` (host tensors of any length), in rank order."""
        if self.world_size == 1:
            return [values]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, values.cpu(), group=self.group)
        return [torch.as_tensor(v) for v in out]

    def all_agree(self, ok: bool) -> bool:
        """True when ``ok`` holds on every trainer."""
        return self.all_reduce([1.0 if ok else 0.0], op=dist.ReduceOp.MIN)[0] > 0.5

    def barrier(self, timeout_s: float, what: str) -> None:
        """Wait for every trainer; after ``timeout_s`` raise naming those that never came."""
        if self.world_size == 1:
            return
        try:
            dist.monitored_barrier(
                group=self.group, timeout=timedelta(seconds=timeout_s), wait_all_ranks=True
            )
        except RuntimeError as err:
            raise RuntimeError(f"{what}: the trainers' barrier failed ({err})") from err


def init_ddp(
    group: Group, device: torch.device, *, timeout_s: float = DDP_TIMEOUT_S
) -> Collectives:
    """Join the trainers' process groups (the samplers take no part)."""
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
    control: dist.ProcessGroup | None = None
    if backend != "gloo":
        made = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
        control = made if isinstance(made, dist.ProcessGroup) else None
    log.info("ddp up: rank %d of %d on %s (%s)", group.me.rank, len(trainers), device, backend)
    return Collectives(group.me.rank, len(trainers), [m.name for m in trainers], control)


def single_process() -> Collectives:
    """The collectives of a job with one trainer."""
    return Collectives(0, 1, ["trainer-0"], None)
