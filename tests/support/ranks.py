"""Joining and leaving a torch.distributed group in the spawned test ranks."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import torch.distributed as dist


def leave_group(*, finished: bool = True) -> None:
    """Destroy the default group; a rank that ``finished`` its work then exits at once.

    Without the barrier, a rank that tears gloo down while its peer's last collective is
    still in flight can abort the peer ("terminate called without an active exception").
    Even after it, gloo's C++ destructors at interpreter exit can abort a finished rank
    the same way, so a finished rank (its results already written) leaves through
    ``os._exit(0)``, past those destructors. A rank leaving on an error skips both: its
    peer may never reach the barrier, and its exception must reach the spawning test.
    """
    if not finished:
        dist.destroy_process_group()
        return
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@contextmanager
def gloo_rank(rank: int, world_size: int, port: int) -> Iterator[None]:
    """Join a gloo group on 127.0.0.1:``port`` for the body; leave it after (:func:`leave_group`:
    a body that returns ends the process, one that raises passes its exception on)."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    finished = False
    try:
        yield
        finished = True
    finally:
        leave_group(finished=finished)
