"""Gradients all-reduced bucket by bucket while the backward still runs.

Every gradient is a view of one flat buffer, laid out in the order the backward produces
them (last layer first) and cut into buckets of about ``bucket_bytes``. A hook fires when a
parameter's gradient is accumulated; when a bucket's last gradient is in, its all-reduce
starts (asynchronously, on the process group's stream) while the backward goes on with the
earlier layers, and :meth:`GradBuckets.finish` makes the caller's stream wait for all of
them. Inside a CUDA graph capture the collectives are captured with the step (NCCL >= 2.9),
so one replay runs forward, backward and the overlapped all-reduce.

Gradients are summed; the step scales its loss by 1/world so that the sum is DDP's mean.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn

BUCKET_BYTES = 256 * 1024
"""Target bucket size: a few buckets per GraphSAGE model, each worth a kernel of its own."""


class GradBuckets:
    """Flat, bucketed gradients of ``params`` with all-reduce hooks."""

    def __init__(
        self,
        params: list[nn.Parameter],
        device: torch.device,
        *,
        bucket_bytes: int | None = None,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        bucket_bytes = BUCKET_BYTES if bucket_bytes is None else bucket_bytes
        order = list(reversed(params))  # the backward reaches the last layer first
        total = sum(p.numel() for p in order)
        dtype = order[0].dtype if order else torch.float32
        self.flat = torch.zeros(total, dtype=dtype, device=device)
        self.group = group
        self.bounds: list[tuple[int, int]] = []
        self._bucket_of: dict[int, int] = {}
        self._size: list[int] = []
        offset = start = 0
        count = 0
        element = self.flat.element_size()
        for p in order:
            n = p.numel()
            p.grad = self.flat[offset : offset + n].view_as(p)
            self._bucket_of[id(p)] = len(self.bounds)
            offset += n
            count += 1
            if (offset - start) * element >= bucket_bytes:
                self.bounds.append((start, offset))
                self._size.append(count)
                start, count = offset, 0
        if count:
            self.bounds.append((start, offset))
            self._size.append(count)
        self._left = list(self._size)
        self._works: list[dist.Work | None] = [None] * len(self.bounds)
        self.active = False
        for p in order:
            p.register_post_accumulate_grad_hook(self._ready)  # type: ignore[no-untyped-call]

    @property
    def num_buckets(self) -> int:
        return len(self.bounds)

    def begin(self) -> None:
        """Zero the gradients and arm the hooks for one backward."""
        self.flat.zero_()
        self._left = list(self._size)
        self._works = [None] * len(self.bounds)
        self.active = True

    def _ready(self, param: Tensor) -> None:
        if not self.active:
            return
        b = self._bucket_of[id(param)]
        self._left[b] -= 1
        if self._left[b] == 0:
            self._launch(b)

    def _launch(self, b: int) -> None:
        lo, hi = self.bounds[b]
        self._works[b] = dist.all_reduce(self.flat[lo:hi], group=self.group, async_op=True)

    def finish(self) -> None:
        """Start any bucket the backward left (unused parameters) and wait for them all."""
        for b, work in enumerate(self._works):
            if work is None:
                self._launch(b)
        for work in self._works:
            assert work is not None
            work.wait()
        self.active = False
