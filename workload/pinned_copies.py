"""Host-device copies through pinned memory: a leaf of the workload (torch only), shared by
the samplers, the runtime and the trainer's fixed-shape steps.

A pageable copy blocks inside the CUDA driver, behind every other pageable copy of the
process (see :mod:`distgnn_workload.runtime.transfers` for the hang that causes); these
never make one.
"""

from __future__ import annotations

import torch
from torch import Tensor


def to_device(tensor: Tensor, device: torch.device) -> Tensor:
    """``tensor`` on ``device``; a host tensor goes through pinned memory, asynchronously.

    The copy is ordered on the current stream of ``device``, as ``Tensor.to`` orders it.
    """
    if device.type != "cuda" or tensor.device.type == "cuda":
        return tensor.to(device)
    pinned = tensor if tensor.is_pinned() else tensor.pin_memory()
    return pinned.to(device, non_blocking=True)


def to_host(tensor: Tensor) -> Tensor:
    """A host copy of ``tensor`` in pinned memory, complete when this returns.

    The copy runs on the current stream of the tensor's device, and only that copy is
    awaited (no pageable copy that could queue behind another thread's).
    """
    out, done = start_to_host(tensor)
    if done is not None:
        done.synchronize()
    return out


def start_to_host(tensor: Tensor) -> tuple[Tensor, torch.cuda.Event | None]:
    """:func:`to_host` without the wait: the pinned copy on its way, and the event after
    which it is there (None: ``tensor`` is on the host already, and is the copy)."""
    if tensor.device.type != "cuda":
        return tensor, None
    out = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    out.copy_(tensor, non_blocking=True)
    done = torch.cuda.Event()  # type: ignore[no-untyped-call]
    done.record(torch.cuda.current_stream(tensor.device))
    return out, done


def copy_in(buffer: Tensor, values: list[int]) -> None:
    """``buffer[:] = values`` from the host without a sync: on a GPU through pinned memory,
    which the caching host allocator keeps until the copy has run."""
    host = torch.tensor(values, dtype=buffer.dtype)
    if buffer.device.type == "cuda":
        host = host.pin_memory()
    buffer.copy_(host, non_blocking=True)
