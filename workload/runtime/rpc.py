"""torch RPC (TensorPipe) over the job's rendezvous store (its shutdown: :mod:`.shutdown`).

Every process of the job is one RPC worker named after its role and rank (``sampler-0``,
``trainer-3``; see :class:`~distgnn_workload.runtime.rendezvous.Member`). RPC carries host
tensors; bulk data between processes of one host (mini-batches, remote feature rows) goes
through shared slots instead (:mod:`distgnn_workload.runtime.shared_slots`), and over RPC
only between hosts. ``DISTGNN_RPC_CUDA=1`` lets tensors travel over RPC as CUDA tensors when
every member has a GPU: each process then maps its device to every other member's
(TensorPipe device maps, :func:`device_maps`; the reverse maps that responses use follow
from the peers' maps). It is off by default: with several pipes sharing TensorPipe's CUDA
staging buffers, a 2-GPU server-client run stalled for good. A process never calls itself:
it has no device map to itself.

A failure inside a remote call comes back as :class:`RemoteError`, naming the peer and
carrying its traceback (:func:`wait_remote`): torch RPC hands an exception that an
``async_execution`` function sets on its future to the caller as a plain value.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch._C._distributed_c10d import Store
from torch.distributed.rendezvous import register_rendezvous_handler
from torch.futures import Future

from distgnn_api.contract import ENV_RPC_CUDA as ENV_RPC_CUDA
from distgnn_api.contract import WorkloadEnv
from distgnn_workload.pinned_copies import to_host
from distgnn_workload.runtime.rendezvous import Group

log = logging.getLogger(__name__)

_SCHEME = "distgnn"

T = TypeVar("T")

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
    """Whether tensors travel over RPC as CUDA tensors: asked for, and every member has a GPU."""
    if (WorkloadEnv.setting(ENV_RPC_CUDA) or "0").lower() not in ("1", "true", "yes"):
        return False
    return all(group.device_of(m.name).startswith("cuda") for m in group.members)


DeviceMap = dict[int | str | torch.device, int | str | torch.device]


def device_maps(me: str, devices: Mapping[str, str]) -> dict[str, DeviceMap]:
    """TensorPipe device maps of member ``me``: its device to each other member's device.

    ``devices`` names every member's device (``cuda:N``). Every member maps to every other
    one, so that each ordered pair has a map and its reverse (what a response uses); no
    member maps to itself, since no process calls itself over RPC.
    """
    mine = torch.device(devices[me])
    maps: dict[str, DeviceMap] = {}
    for name, dev in devices.items():
        if name != me:
            maps[name] = {mine: torch.device(dev)}
    return maps


class RemoteError(RuntimeError):
    """A call to another process of the job failed there; the message names the peer."""

    @classmethod
    def of(cls, err: BaseException, where: str) -> RemoteError:
        """The error to hand back to a caller: where it happened, what, and the traceback."""
        if isinstance(err, RemoteError):
            return err
        trace = "".join(traceback.format_exception(err)).rstrip()
        return cls(
            f"{where} failed: {type(err).__name__}: {err}\n--- traceback on {where}:\n{trace}"
        )


def check_remote(value: T, peer: str) -> T:
    """``value`` as returned by ``peer``, raising it if it is an error that came back as a value."""
    if isinstance(value, RemoteError):
        raise value
    if isinstance(value, BaseException):
        raise RemoteError(f"{peer} failed: {type(value).__name__}: {value}") from value
    return value


def wait_remote(fut: Future[T], peer: str) -> T:
    """Wait for a remote call to ``peer``; any failure is raised as a :class:`RemoteError`."""
    try:
        value = fut.wait()
    except RemoteError:
        raise
    except Exception as err:  # torch re-raises the remote error with the worker's name
        raise RemoteError(f"{peer} failed: {err}") from err
    return check_remote(value, peer)


class RpcContext:
    """This process's RPC agent: how to address peers and put tensors on the wire."""

    def __init__(self, group: Group, device: torch.device, cuda: bool) -> None:
        self.group = group
        self.device = device
        self.cuda = cuda

    def wire(self, tensor: Tensor) -> Tensor:
        """A tensor as it may be returned over RPC: on its device with CUDA RPC, else on host."""
        return tensor if self.cuda else to_host(tensor)

    def arrive(self, tensor: Tensor) -> Tensor:
        """A tensor received over RPC, on this process's device."""
        return tensor.to(self.device, non_blocking=True)


CPU_TRANSPORTS = ("uv",)
"""TensorPipe's transports for a process without a GPU: libuv's sockets alone. The default
set adds the shared-memory transport, whose reactor thread busy-polls while the process is
idle (two idle CPU processes: 3.3 s of CPU each in 10 s, against none over uv); a GPU process
keeps the default set, whose shared memory serves its host tensors between the local ranks."""


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
        _transports=None if device.type == "cuda" else list(CPU_TRANSPORTS),
    )
    if cuda:
        options.set_devices([device])
        devices = {m.name: group.device_of(m.name) for m in group.members}
        devices[group.me.name] = str(device)
        for name, mapping in device_maps(group.me.name, devices).items():
            options.set_device_map(name, mapping)
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
