"""Starting test ranks as processes, and joining and leaving their torch.distributed group."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from multiprocessing.process import BaseProcess
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


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


def join_group(
    rank: int,
    world_size: int,
    init_method: str,
    *,
    cuda: bool,
    timeout: timedelta | None = None,
) -> torch.device:
    """Join the default group: NCCL on GPU ``rank`` with ``cuda`` (made the current device),
    gloo on the CPU without. Returns the rank's device."""
    device = torch.device("cpu")
    if cuda:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if cuda else None,
    )
    return device


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


# Imported once by the forkserver of this pytest process, not by every rank it starts. Not
# PyG where there is a GPU: torch_sparse and torch_scatter ask the CUDA driver for its version
# when imported, and a driver initialized before the fork fails in every rank.
PRELOAD = ["torch", "torch.distributed", "torch.distributed.rpc"]


def _preload() -> list[str]:
    import torch

    return PRELOAD if torch.cuda.is_available() else [*PRELOAD, "torch_geometric"]


def _with_env(
    rank: int, env: dict[str, str], fn: Callable[..., None], args: tuple[Any, ...]
) -> None:
    _run_with_env(env, fn, (rank, *args))


def spawn_ranks(fn: Callable[..., None], args: tuple[Any, ...], nprocs: int) -> None:
    """``torch.multiprocessing.spawn(fn, args, nprocs)``, with ranks forked from a server
    that imported torch once (``forkserver``) instead of fresh interpreters: the same
    processes (no CUDA context and no thread is inherited; each gets this process's current
    environment), seconds of CPU sooner each. Raises as ``spawn`` does when a rank fails."""
    multiprocessing.set_forkserver_preload(_preload())
    mp.start_processes(  # type: ignore[attr-defined,no-untyped-call]
        _with_env,
        args=(dict(os.environ), fn, args),
        nprocs=nprocs,
        join=True,
        start_method="forkserver",
    )


def rank_process(target: Callable[..., None], args: tuple[Any, ...]) -> BaseProcess:
    """An unstarted process running ``target(*args)`` the way :func:`spawn_ranks` starts
    ranks, for tests that read the exit codes themselves."""
    multiprocessing.set_forkserver_preload(_preload())
    ctx = multiprocessing.get_context("forkserver")
    return ctx.Process(target=_run_with_env, args=(dict(os.environ), target, args))


def run_rank_processes(
    target: Callable[..., None],
    args_of_rank: Callable[[int], tuple[Any, ...]],
    world: int,
    join_s: float,
) -> list[int | None]:
    """Run ``target(*args_of_rank(r))`` for every rank ``r`` (:func:`rank_process`) and wait
    up to ``join_s`` for each: their exit codes, None for a rank still running (then killed:
    a hang fails the test instead of the suite)."""
    procs = [rank_process(target, args_of_rank(r)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(join_s)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.is_alive():
            p.kill()
    return codes


def _run_with_env(env: dict[str, str], target: Callable[..., None], args: tuple[Any, ...]) -> None:
    os.environ.clear()
    os.environ.update(env)
    target(*args)
