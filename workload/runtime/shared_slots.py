"""Bulk data between processes of one host through shared buffers, not through the RPC wire.

A mini-batch (~120 MB of features) or a batch's remote feature rows (tens of MB) would cross
TensorPipe as one message. Between processes of one host the producer instead fills one of
a few fixed buffers ("slots") that the consumer mapped once: CUDA IPC for GPU memory, a file
under ``/dev/shm`` for host memory. RPC carries only the request (which slot, what to put
there) and a small answer (the sizes); the consumer copies out of the slot (device to
device, over NVLink between GPUs) and frees it.

No GPU work of one process waits on another's: the producer synchronises its stream before
it answers, and the consumer hands a slot out again only after its copy out of it finished
(a CUDA event it records after the copy). Processes that share neither host nor GPUs (pods
on different nodes, containers without a common ``/dev/shm``) cannot attach; callers then
send the data over RPC instead.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import Tensor

from distgnn_workload.runtime import rpc_targets
from distgnn_workload.runtime.rpc_targets import Target

log = logging.getLogger(__name__)

SlotSpec = dict[str, tuple[tuple[int, ...], torch.dtype]]
"""The buffers of one slot: name -> (shape, dtype)."""

SHM_DIR = Path("/dev/shm")


def host_id() -> str:
    """This host (and boot): processes with the same id can share memory and GPUs."""
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{socket.gethostname()}/{boot}"


def slot_bytes(spec: SlotSpec) -> int:
    """Bytes of one slot."""
    total = 0
    for shape, dtype in spec.values():
        numel = 1
        for n in shape:
            numel *= n
        total += numel * torch.tensor([], dtype=dtype).element_size()
    return total


# --------------------------------------------------------------------------- producer


class SlotOwner:
    """The slots this process fills for its consumers, on its device."""

    def __init__(self, device: torch.device, tag: str) -> None:
        self.device = device
        self.tag = "".join(c if c.isalnum() or c in "-_" else "_" for c in tag)
        self._slots: dict[str, list[dict[str, Tensor]]] = {}
        self._files: list[Path] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def open(self, consumer: str, spec: SlotSpec, count: int) -> list[dict[str, Any]]:
        """Allocate ``count`` slots for ``consumer``; return how to map each buffer."""
        with self._lock:
            if consumer in self._slots:
                raise RuntimeError(f"{consumer} already opened slots here")
            slots: list[dict[str, Tensor]] = []
            handles: list[dict[str, Any]] = []
            for k in range(count):
                buffers: dict[str, Tensor] = {}
                mapped: dict[str, Any] = {}
                for name, (shape, dtype) in spec.items():
                    buffers[name], mapped[name] = self._allocate(consumer, k, name, shape, dtype)
                slots.append(buffers)
                handles.append(mapped)
            self._slots[consumer] = slots
        log.info(
            "%d shared slots of %.0f MiB for %s on %s",
            count,
            slot_bytes(spec) / 2**20,
            consumer,
            self.device,
        )
        return handles

    def _allocate(
        self, consumer: str, k: int, name: str, shape: tuple[int, ...], dtype: torch.dtype
    ) -> tuple[Tensor, Any]:
        if self.device.type == "cuda":
            from torch.multiprocessing.reductions import reduce_tensor

            # no fill kernel: a slot is only read where its producer wrote first
            t = torch.empty(shape, dtype=dtype, device=self.device)
            return t, ("cuda", reduce_tensor(t))  # type: ignore[no-untyped-call]
        numel = 1
        for n in shape:
            numel *= n
        path = SHM_DIR / f"distgnn-{self.tag}-{consumer}-{k}-{name}"
        t = torch.from_file(str(path), shared=True, size=max(numel, 1), dtype=dtype)
        self._files.append(path)
        return t[:numel].view(shape), ("file", str(path), shape, dtype)

    def buffers(self, consumer: str, index: int) -> dict[str, Tensor]:
        return self._slots[consumer][index]

    def close(self) -> None:
        """Remove the shared files (their memory lives on while a process maps it)."""
        for path in self._files:
            with contextlib.suppress(OSError):
                path.unlink()
        self._files = []


SLOT_OWNER = Target[SlotOwner]("shared slots")


def serve_slots(owner: SlotOwner) -> None:
    """Let consumers open slots in this process."""
    rpc_targets.register(SLOT_OWNER, owner)


def owner() -> SlotOwner:
    """The slots this process fills (an RPC target's view)."""
    return rpc_targets.get(SLOT_OWNER)


def _open_slots(
    consumer: str, host: str, spec: list[tuple[str, tuple[int, ...], torch.dtype]], count: int
) -> list[dict[str, Any]] | None:
    """RPC target: slots for ``consumer``, or None when it runs on another host."""
    if host != host_id():
        return None
    slots = owner()
    if slots.device.type == "cuda":
        torch.cuda.set_device(slots.device)  # not GPU 0, where a new RPC thread starts
    return slots.open(consumer, {name: (shape, dtype) for name, shape, dtype in spec}, count)


# --------------------------------------------------------------------------- consumer


def _map(handle: Any) -> Tensor:
    kind = handle[0]
    if kind == "cuda":
        rebuild, args = handle[1]
        tensor: Tensor = rebuild(*args)
        return tensor
    _, path, shape, dtype = handle
    numel = 1
    for n in shape:
        numel *= n
    tensor = torch.from_file(path, shared=True, size=max(numel, 1), dtype=dtype)
    # both processes map it now: the name can go (processes end with os._exit, no cleanup)
    with contextlib.suppress(OSError):
        os.unlink(path)
    return tensor[:numel].view(shape)


class SlotReader:
    """This process's view of another process's slots, and which of them are free.

    ``acquire`` hands out a free slot (waiting for the copy out of one to finish if all are
    taken), ``release`` frees it once the work queued so far on the current stream is done.
    Thread-safe.
    """

    def __init__(self, peer: str, slots: list[dict[str, Tensor]], device: torch.device) -> None:
        self.peer = peer
        self.slots = slots
        self.device = device
        self._free = list(range(len(slots)))
        self._releasing: dict[int, torch.cuda.Event | None] = {}
        self._cond = threading.Condition()

    @classmethod
    def attach(
        cls,
        peer: str,
        me: str,
        spec: SlotSpec,
        count: int,
        device: torch.device,
        *,
        call: Callable[..., Any] | None = None,
    ) -> SlotReader | None:
        """Open ``count`` slots in ``peer``; None when it cannot share memory with this process."""
        request = [(name, shape, dtype) for name, (shape, dtype) in spec.items()]
        try:
            if call is None:
                handles = rpc.rpc_sync(peer, _open_slots, args=(me, host_id(), request, count))
            else:
                handles = call(me, host_id(), request, count)
            if handles is None:
                log.info("%s runs on another host: its data comes over RPC", peer)
                return None
            slots = [{name: _map(h) for name, h in mapped.items()} for mapped in handles]
        except (RuntimeError, OSError) as err:
            log.warning(
                "cannot map the shared slots of %s (%s): its data comes over RPC", peer, err
            )
            return None
        log.info("mapped %d shared slots of %s", count, peer)
        return cls(peer, slots, device)

    def acquire(self) -> int:
        with self._cond:
            while True:
                for index, event in list(self._releasing.items()):
                    if event is None or event.query():  # type: ignore[no-untyped-call]
                        del self._releasing[index]
                        self._free.append(index)
                if self._free:
                    return self._free.pop(0)
                if self._releasing:
                    index, event = next(iter(self._releasing.items()))
                    assert event is not None
                    event.synchronize()
                    continue
                self._cond.wait()

    def release(self, index: int) -> None:
        event: torch.cuda.Event | None = None
        if self.device.type == "cuda":
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(torch.cuda.current_stream(self.device))
        with self._cond:
            self._releasing[index] = event
            self._cond.notify()

    def buffers(self, index: int) -> dict[str, Tensor]:
        return self.slots[index]


def take(t: Tensor, device: torch.device) -> Tensor:
    """A tensor of this process holding a copy of (part of) a slot buffer, on ``device``."""
    if t.device == device:
        return t.clone()
    return t.to(device, non_blocking=True)
