"""Leaving a torch.distributed group in the spawned test ranks."""

from __future__ import annotations

import torch.distributed as dist


def leave_group(*, finished: bool = True) -> None:
    """Destroy the default group, after a barrier when this rank ``finished`` its work.

    Without the barrier, a rank that tears gloo down while its peer's last collective is
    still in flight can abort the peer ("terminate called without an active exception").
    A rank leaving on an error skips the barrier: its peer may never reach it.
    """
    if finished:
        dist.barrier()
    dist.destroy_process_group()
