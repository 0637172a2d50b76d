"""Host-device copies and GPU waits that never block inside the CUDA driver on another process.

The CUDA driver serialises the pageable copies of one process's context. A thread that sits
in a pageable device-to-host copy (``.item()``, ``.tolist()``, ``.cpu()``) whose stream waits
for a collective, i.e. for a peer that is still working, therefore blocks every other
pageable copy of the process, including the RPC thread that serves that very peer its
remote feature rows. Peer and process then wait for each other for ever: the hang after
evaluation and at the end of training with a partial feature cache. Two rules avoid it:

- RPC threads copy host tensors to the device from pinned memory only
  (:func:`distgnn_workload.pinned_copies.to_device`);
- a thread that waits for GPU work that depends on other processes polls an event with a
  deadline (:func:`wait_for_stream`) before it reads anything back, so the read-back copy
  itself never waits.
"""

from __future__ import annotations

import threading
import time

import torch

POLL_S = 0.0002
"""Sleep between polls of a pending CUDA event."""


class GpuWaitTimeout(TimeoutError):
    """GPU work did not finish in time; the message names what was awaited."""


def wait_for_event(event: torch.cuda.Event, *, timeout_s: float | None, what: str) -> None:
    """Wait until ``event`` has happened, polling it rather than blocking in the driver;
    raises :class:`GpuWaitTimeout` naming ``what`` after ``timeout_s`` (None: no limit)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not event.query():  # type: ignore[no-untyped-call]
        if deadline is not None and time.monotonic() > deadline:
            raise GpuWaitTimeout(f"{what} did not finish within {timeout_s:.0f}s")
        time.sleep(POLL_S)


def wait_for_stream(device: torch.device, *, timeout_s: float | None, what: str) -> None:
    """Wait until the work queued so far on ``device``'s current stream has run.

    See :func:`wait_for_event`. A no-op on CPU.
    """
    if device.type != "cuda":
        return
    event = torch.cuda.Event()  # type: ignore[no-untyped-call]
    event.record(torch.cuda.current_stream(device))
    wait_for_event(event, timeout_s=timeout_s, what=what)


def thread_stream(local: threading.local, device: torch.device) -> torch.cuda.Stream:
    """The calling thread's own side stream on ``device``, kept in ``local``: work queued on
    it waits for nothing queued by other threads (the training thread's kernels)."""
    stream: torch.cuda.Stream | None = getattr(local, "stream", None)
    if stream is None:
        stream = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        local.stream = stream
    return stream
