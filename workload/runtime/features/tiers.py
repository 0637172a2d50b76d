"""The rows of a feature table in two tiers: the first ``split`` rows in GPU memory, the
rest in pinned (page-locked) host memory that GPU kernels read in place.

The host tier is registered with CUDA once (``cudaHostRegister``, in place: no copy, no
power-of-two rounding of the caching host allocator) and aliased by a CUDA tensor over the
same memory: with unified virtual addressing a pinned host pointer is valid on the device,
so a gather kernel reads its rows over PCIe with no staging copy. A gather of slots from
both tiers is one kernel (Triton) that reads each row from the tier that holds it.
On a CPU table both tiers are host tensors and the same slots give the same rows.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

try:  # Triton comes with CUDA builds of torch; CPU builds have none
    import triton  # type: ignore[import-untyped]
    import triton.language as tl  # type: ignore[import-untyped]
except ImportError:  # pragma: no cover - exercised where torch has no Triton
    triton = None


@dataclass(frozen=True)
class TieredRows:
    """Rows addressed by slot: ``slot < split`` on the device, the others in host memory.

    Frozen: a table swaps a whole new one in when it re-places its rows, so a gather on
    another thread reads one consistent placement.
    """

    device_rows: Tensor
    """[split, F] in GPU memory (the hot rows), or on the host for a CPU table."""
    host_rows: Tensor | None = None
    """[H, F] in pinned host memory (slot ``split + i`` is row i), or None."""
    host_view: Tensor | None = None
    """A CUDA tensor aliasing ``host_rows`` (UVA), or ``host_rows`` on a CPU table."""

    @property
    def split(self) -> int:
        return int(self.device_rows.shape[0])

    @property
    def num_host(self) -> int:
        return 0 if self.host_rows is None else int(self.host_rows.shape[0])

    @property
    def num_rows(self) -> int:
        return self.split + self.num_host

    @property
    def dtype(self) -> torch.dtype:
        return self.device_rows.dtype

    @property
    def row_bytes(self) -> int:
        return int(self.device_rows.shape[1]) * self.device_rows.element_size()

    def gather(self, slot: Tensor, out: Tensor | None = None) -> Tensor:
        """The rows at ``slot`` (integers, all valid, on the table's device)."""
        if self.host_view is None:
            return torch.index_select(self.device_rows, 0, slot.to(torch.int64), out=out)
        if self.split == 0:
            return torch.index_select(self.host_view, 0, slot.to(torch.int64), out=out)
        n, f = int(slot.numel()), int(self.device_rows.shape[1])
        if out is None:
            out = torch.empty((n, f), dtype=self.dtype, device=slot.device)
        if slot.device.type == "cuda" and triton is not None:
            if n:
                _launch_tiered_gather(slot, self.device_rows, self.host_view, out)
            return out
        # a CPU table (or no Triton): each tier's rows by a mask (one host sync)
        slot = slot.to(torch.int64)
        on_device = slot < self.split
        dev = on_device.nonzero().squeeze(1)
        host = (~on_device).nonzero().squeeze(1)
        out[dev] = self.device_rows.index_select(0, slot[dev])
        out[host] = self.host_view.index_select(0, slot[host] - self.split)
        return out


def register_host(rows: Tensor) -> Tensor:
    """Pin ``rows`` (a contiguous CPU tensor) in place, once; unpinned when it is freed."""
    if rows.is_pinned() or rows.numel() == 0:
        return rows
    rows = rows.contiguous()
    cudart: Any = torch.cuda.cudart()  # type: ignore[no-untyped-call]
    ptr, size = rows.data_ptr(), rows.numel() * rows.element_size()
    err = cudart.cudaHostRegister(ptr, size, 0)
    if int(err) != 0:
        raise RuntimeError(
            f"could not pin {size} bytes of feature rows in host memory (CUDA error {int(err)}); "
            "lower the host share of the table (spec.samplers.featureMemory) or raise the "
            "pod's memory limit"
        )
    weakref.finalize(rows, cudart.cudaHostUnregister, ptr)
    return rows


class _HostArray:
    """A ``__cuda_array_interface__`` over pinned host memory: valid on the device (UVA)."""

    def __init__(self, rows: Tensor) -> None:
        self.rows = rows  # keeps the memory alive as long as the view
        self.__cuda_array_interface__ = {
            "shape": (int(rows.shape[0]), int(rows.shape[1]) * rows.element_size()),
            "typestr": "|u1",
            "data": (rows.data_ptr(), False),
            "version": 3,
            "strides": None,
        }


def device_view(host_rows: Tensor, device: torch.device) -> Tensor:
    """A CUDA tensor over the pinned ``host_rows`` (no copy): kernels read the host memory."""
    if device.type != "cuda":
        return host_rows
    if host_rows.numel() == 0:
        return torch.empty(host_rows.shape, dtype=host_rows.dtype, device=device)
    with torch.cuda.device(device):
        raw = torch.as_tensor(_HostArray(host_rows), device=device)
    return raw.view(host_rows.dtype)


def host_tier(rows: Tensor, device: torch.device) -> tuple[Tensor, Tensor]:
    """``rows`` registered as a host tier of a table on ``device``, and its device view."""
    if device.type == "cuda":
        rows = register_host(rows.contiguous())
    return rows, device_view(rows, device)


if triton is not None:

    @triton.jit  # type: ignore[untyped-decorator]
    def _tiered_gather_kernel(  # type: ignore[no-untyped-def]
        slot_ptr,
        dev_ptr,
        host_ptr,
        out_ptr,
        n,
        split,
        num_features,
        BLOCK_R: tl.constexpr,
        BLOCK_F: tl.constexpr,
    ):
        r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        rmask = r < n
        s = tl.load(slot_ptr + r, mask=rmask, other=0).to(tl.int64)
        on_dev = s < split
        dev_base = s * num_features
        host_base = (s - split) * num_features
        out_base = r.to(tl.int64) * num_features
        for f0 in range(0, num_features, BLOCK_F):
            c = f0 + tl.arange(0, BLOCK_F)
            m = rmask[:, None] & (c < num_features)[None, :]
            a = tl.load(dev_ptr + dev_base[:, None] + c[None, :], mask=m & on_dev[:, None], other=0)
            b = tl.load(
                host_ptr + host_base[:, None] + c[None, :], mask=m & ~on_dev[:, None], other=0
            )
            tl.store(
                out_ptr + out_base[:, None] + c[None, :], tl.where(on_dev[:, None], a, b), mask=m
            )


def _launch_tiered_gather(slot: Tensor, dev: Tensor, host: Tensor, out: Tensor) -> None:
    n, f = int(slot.numel()), int(dev.shape[1])
    block_f = min(triton.next_power_of_2(f), 256)
    block_r = max(1, 4096 // block_f)
    grid = (triton.cdiv(n, block_r),)
    with torch.cuda.device(slot.device):
        _tiered_gather_kernel[grid](
            slot.contiguous(), dev, host, out, n, dev.shape[0], f, BLOCK_R=block_r, BLOCK_F=block_f
        )
