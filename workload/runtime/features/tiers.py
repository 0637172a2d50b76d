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

from distgnn_api.feature_memory import HOST_ROW_ALIGN, host_row_bytes

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
    host_base: Tensor | None = None
    """The registered allocation under ``host_rows`` (unregistered when it is freed)."""

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


def new_host_rows(rows: int, num_features: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(allocation, [rows, num_features] view of it) with every row 128-byte aligned."""
    elem = torch.empty((), dtype=dtype).element_size()
    stride = host_row_bytes(num_features * elem) // elem
    base = torch.empty(rows * stride + HOST_ROW_ALIGN // elem, dtype=dtype)
    skip = (-base.data_ptr() % HOST_ROW_ALIGN) // elem
    view = base[skip : skip + rows * stride].view(rows, stride)[:, :num_features]
    return base, view


def register_host(rows: Tensor, setting: str = "spec.samplers.featureMemory") -> Tensor:
    """Pin ``rows`` (a contiguous CPU tensor) in place, once; unpinned when it is freed.
    ``setting``: the spec field whose budget sent the rows to the host (named in the error)."""
    if rows.is_pinned() or rows.numel() == 0:
        return rows
    cudart: Any = torch.cuda.cudart()  # type: ignore[no-untyped-call]
    ptr, size = rows.data_ptr(), rows.numel() * rows.element_size()
    err = cudart.cudaHostRegister(ptr, size, 0)
    if int(err) != 0:
        raise RuntimeError(
            f"could not pin {size} bytes of rows in host memory (CUDA error {int(err)}); "
            f"raise {setting} (less stays on the host) or the pod's memory limit"
        )
    weakref.finalize(rows, cudart.cudaHostUnregister, ptr)
    return rows


def place_hot(
    tiers: TieredRows, held: int, budget: int, score: Tensor | None, device: torch.device
) -> tuple[TieredRows, Tensor]:
    """Copy the highest-``score`` of the ``held`` host rows, up to ``budget`` bytes, to the
    device tier (a UVA gather: no staging copy). Returns the new tiers and the slot (int32,
    host) of each held row: its device copy's for the hot ones, its host row's for the rest.
    ``score``: one per held row, or None to keep the rows' order."""
    assert tiers.host_view is not None
    cap = min(held, budget // max(tiers.row_bytes, 1))
    if score is None or cap >= held:
        hot = torch.arange(cap)
    else:
        hot = torch.topk(score.to("cpu", torch.float64)[:held], cap, sorted=True).indices
    device_rows = tiers.host_view.index_select(0, hot.to(device))
    slot = torch.arange(held, dtype=torch.int32) + cap
    slot[hot] = torch.arange(cap, dtype=torch.int32)
    return TieredRows(device_rows, tiers.host_rows, tiers.host_view, tiers.host_base), slot


class _HostArray:
    """A ``__cuda_array_interface__`` over pinned host memory: valid on the device (UVA)."""

    def __init__(self, base: Tensor) -> None:
        self.base = base  # keeps the memory alive as long as the view
        self.__cuda_array_interface__ = {
            "shape": (int(base.numel()) * base.element_size(),),
            "typestr": "|u1",
            "data": (base.data_ptr(), False),
            "version": 3,
            "strides": None,
        }


def device_view(base: Tensor, rows: Tensor, device: torch.device) -> Tensor:
    """A CUDA tensor over ``rows``, a view of the pinned ``base`` (no copy): kernels that
    read it read the host memory."""
    if device.type != "cuda":
        return rows
    if rows.numel() == 0:
        return torch.empty(rows.shape, dtype=rows.dtype, device=device)
    with torch.cuda.device(device):
        raw = torch.as_tensor(_HostArray(base), device=device).view(base.dtype)
    offset = (rows.data_ptr() - base.data_ptr()) // rows.element_size()
    return raw.as_strided(rows.shape, rows.stride(), offset)


def host_tier(rows: int, num_features: int, dtype: torch.dtype, device: torch.device) -> TieredRows:
    """An empty device tier and a host tier of ``rows`` aligned rows, registered once for a
    table on ``device`` (fill its ``host_rows``, then place)."""
    base, host = new_host_rows(rows, num_features, dtype)
    if device.type == "cuda":
        register_host(base)
    empty = torch.empty((0, num_features), dtype=dtype, device=device)
    return TieredRows(empty, host, device_view(base, host, device), base)


def pinned_rows(
    values: Tensor, device: torch.device, setting: str = "spec.samplers.featureMemory"
) -> Tensor:
    """``values`` ([N, F], any device) copied once into pinned host memory (aligned rows,
    registered in place) and returned as a tensor on ``device`` over that memory: on a GPU a
    CUDA view (UVA), which kernels read and write in place with no staging copy; on a CPU
    device the host rows themselves. The view keeps the allocation alive."""
    base, host = new_host_rows(int(values.shape[0]), int(values.shape[1]), values.dtype)
    host.copy_(values)
    if device.type != "cuda":
        return host
    register_host(base, setting)
    return device_view(base, host, device)


def own_rows(
    rows: Tensor, ids: Tensor, capacity: int, budget: int | None, device: torch.device
) -> tuple[TieredRows, Tensor, bool]:
    """A holder's own ``rows`` (of the nodes ``ids``, on the host) before placement, with room
    for ``capacity`` rows in all: ``(tiers, row_ids, tiered)``. Within ``budget`` bytes (or
    with none) every row goes to ``device``; over it every row stays in pinned host memory
    and the table's placement copies the hottest ones to the device. ``row_ids`` is the node
    of each host row, with room for the cache to come."""
    owned = int(rows.shape[0])
    capacity = max(capacity, owned)
    row_bytes = int(rows.shape[1]) * rows.element_size()
    if budget is None or capacity * row_bytes <= budget:
        return TieredRows(rows.to(device)), ids, False
    tiers = host_tier(capacity, int(rows.shape[1]), rows.dtype, device)
    assert tiers.host_rows is not None
    tiers.host_rows[:owned] = rows.cpu()
    return tiers, torch.cat([ids, ids.new_empty(capacity - owned)]), True


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
        host_stride,
        BLOCK_R: tl.constexpr,
        BLOCK_F: tl.constexpr,
    ):
        r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        rmask = r < n
        s = tl.load(slot_ptr + r, mask=rmask, other=0).to(tl.int64)
        on_dev = s < split
        dev_base = s * num_features
        host_base = (s - split) * host_stride
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
            slot.contiguous(),
            dev,
            host,
            out,
            n,
            dev.shape[0],
            f,
            host.stride(0),
            BLOCK_R=block_r,
            BLOCK_F=block_f,
        )
