"""torch RPC (TensorPipe) over the job's rendezvous store, and the job's orderly shutdown.

Every process of the job is one RPC worker named after its role and rank (``sampler-0``,
``trainer-3``; see :class:`~distgnn_workload.runtime.rendezvous.Member`). When every member
has a GPU, tensors may travel as CUDA tensors: each process maps its device to each peer's
(TensorPipe device maps), so that a sampler's GPU output lands on the trainer's GPU without a
host copy (CUDA IPC on one host). ``DISTGNN_RPC_CUDA=0`` forces host tensors.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch._C._distributed_c10d import Store
from torch.distributed.rendezvous import register_rendezvous_handler

from distgnn_workload.runtime.rendezvous import Group

log = logging.getLogger(__name__)

ENV_RPC_CUDA = "DISTGNN_RPC_CUDA"  # 0 sends host tensors over RPC even when every peer has a GPU
LEFT_PREFIX = "distgnn/left/"
_SCHEME = "distgnn"

_stores: dict[str, tuple[Store, int, int]] = {}
_counter = itertools.count()
_lock = threading.Lock()
_registered = False


def _handler(url: str, **kwargs: Any) -> Iterator[tuple[Store, int, int]]:
    token = url.split("://", 1)[1].split("?", 1)[0]
    yield _stores[token]


def _register() -> None:
    global _registered
    with _lock:
        if not _registered:
            register_rendezvous_handler(_SCHEME, _handler)  # type: ignore[no-untyped-call]
            _registered = True


def cuda_rpc_enabled(group: Group) -> bool:
    """Whether tensors travel over RPC as CUDA tensors: every member has a GPU, not disabled."""
    if os.environ.get(ENV_RPC_CUDA, "1").strip() in ("0", "false", "no"):
        return False
    return all(group.device_of(m.name).startswith("cuda") for m in group.members)


class RpcContext:
    """This process's RPC agent: how to address peers and put tensors on the wire."""

    def __init__(self, group: Group, device: torch.device, cuda: bool) -> None:
        self.group = group
        self.device = device
        self.cuda = cuda

    def wire(self, tensor: Tensor) -> Tensor:
        """A tensor as it may be returned over RPC: on its device with CUDA RPC, else on host."""
        return tensor if self.cuda else tensor.cpu()

    def arrive(self, tensor: Tensor) -> Tensor:
        """A tensor received over RPC, on this process's device."""
        return tensor.to(self.device, non_blocking=True)


def init_rpc(
    group: Group,
    device: torch.device,
    *,
    num_worker_threads: int = 16,
    timeout_s: float = 300.0,
) -> RpcContext:
    """Start this process's RPC agent on the group's store."""
    _register()
    token = str(next(_counter))
    _stores[token] = (group.store, group.rpc_rank, group.world_size)
    cuda = cuda_rpc_enabled(group) and device.type == "cuda"
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"{_SCHEME}://{token}",
        num_worker_threads=num_worker_threads,
        rpc_timeout=timeout_s,
    )
    if cuda:
        options.set_devices([device])
        for member in group.members:
            if member is not group.me:
                peer = torch.device(group.device_of(member.name))
                options.set_device_map(member.name, {device: peer})
    t0 = time.perf_counter()
    rpc.init_rpc(  # type: ignore[no-untyped-call]
        group.me.name,
        rank=group.rpc_rank,
        world_size=group.world_size,
        rpc_backend_options=options,
    )
    log.info(
        "rpc up as %s in %.1fs (%s tensors)",
        group.me.name,
        time.perf_counter() - t0,
        "CUDA" if cuda else "host",
    )
    return RpcContext(group, device, cuda)


def shutdown(group: Group, *, owner_wait_s: float = 60.0) -> None:
    """Leave the job in order: a graceful RPC shutdown (a barrier of every member), then the
    store owner waits until every other member has left so that the store outlives them."""
    rpc.shutdown(graceful=True)
    me = group.me
    if group.rpc_rank == 0:
        others = [LEFT_PREFIX + m.name for m in group.members if m is not me]
        deadline = time.monotonic() + owner_wait_s
        while others and time.monotonic() < deadline:
            if group.store.check(others):
                return
            time.sleep(0.05)
        if others:
            log.warning("some peers did not confirm leaving within %.0fs", owner_wait_s)
    else:
        try:
            group.store.set(LEFT_PREFIX + me.name, "1")
        except RuntimeError as err:
            log.debug("store gone before %s confirmed leaving: %s", me.name, err)
