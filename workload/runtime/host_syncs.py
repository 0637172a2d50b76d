"""Counting host syncs by construction, on any device.

On a GPU, an operation whose result size or value the host needs (``.item()``,
``.tolist()``, ``int(t)``, ``bool(t)``, ``torch.unique``, ``nonzero``, ``bincount``, a
boolean-mask index, ``index_put_`` with ``accumulate``, a copy to the host) blocks the host
until the device has run everything queued before it. ``torch.cuda.set_sync_debug_mode``
catches those on a GPU only. :class:`HostSyncCounter` records every call of such an
operation from Python, through a ``TorchFunctionMode``, whatever the device: a step that a
CPU test runs under it with no record calls none of them on a GPU either (operations that
a C++ kernel runs inside another are not seen; the GPU test under the sync debug mode
covers those). ``.to(device)`` is not counted: whether it copies to the host depends on
the device, which on CPU is the host. Modes are per thread: a counter sees the thread that
entered it only.
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

READ_BACK = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "cpu",
        "__bool__",
        "__int__",
        "__float__",
        "__index__",
        "nonzero",
        "argwhere",
        "unique",
        "unique_consecutive",
        "bincount",
        "masked_select",
        "histc",
    }
)
"""Operations that read device data back on every call."""

_PACKAGE = str(Path(__file__).resolve().parents[1])
_TORCH_OPTIM = str(Path(torch.optim.__file__).resolve().parent)


@dataclass(frozen=True)
class HostSync:
    """One recorded call: the operation and the innermost frame of this package that made it."""

    op: str
    where: str


class HostSyncCounter(TorchFunctionMode):
    """``with HostSyncCounter() as syncs: ...`` records the host syncs of the block."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[HostSync] = []

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        op = _syncing(func, args, kwargs)
        if op is not None and not _in_torch_optim():
            self.calls.append(HostSync(op, _caller()))
        return func(*args, **kwargs)

    @property
    def count(self) -> int:
        return len(self.calls)

    def by_site(self) -> Counter[HostSync]:
        """How often each (operation, call site) occurred."""
        return Counter(self.calls)

    def summary(self) -> str:
        return "\n".join(f"{n:5d}  {s.op:<18} {s.where}" for s, n in self.by_site().most_common())


def _syncing(
    func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str | None:
    name = getattr(func, "__name__", "")
    if name in READ_BACK:
        return name
    if name == "repeat_interleave" and kwargs.get("output_size") is None and len(args) < 4:
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        return name if isinstance(repeats, torch.Tensor) else None
    if name in ("__getitem__", "__setitem__", "index_put_", "index_put"):
        index = args[1] if len(args) > 1 else kwargs.get("indices")
        parts = index if isinstance(index, tuple | list) else (index,)
        value = args[2] if len(args) > 2 else kwargs.get("values")
        # a mask with one value to fill is a masked_fill, with no read-back
        filled = name == "__setitem__" and not (
            isinstance(value, torch.Tensor) and value.numel() > 1
        )
        if not filled and any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
            return f"{name}[bool mask]"
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if name.startswith("index_put") and accumulate:
            return f"{name}(accumulate)"  # CUDA checks the indices' range on the host
    if name == "copy_" and len(args) > 1 and isinstance(args[1], torch.Tensor):
        host, source = args[0].device.type, args[1].device.type
        return "copy_(to host)" if host == "cpu" and source == "cuda" else None
    return None


def _in_torch_optim() -> bool:
    """torch's optimizers keep their step counts in host tensors (unless ``capturable``):
    their ``.item()`` reads no device memory."""
    return any(f.filename.startswith(_TORCH_OPTIM) for f in traceback.extract_stack()[-12:])


def _caller() -> str:
    """The innermost frame of this package outside this module (else the innermost one)."""
    frames = [f for f in traceback.extract_stack() if not f.filename.endswith("host_syncs.py")]
    for frame in reversed(frames):
        if frame.filename.startswith(_PACKAGE):
            return f"{Path(frame.filename).relative_to(_PACKAGE)}:{frame.lineno} {frame.name}"
    if not frames:
        return "?"
    last = frames[-1]
    return f"{last.filename}:{last.lineno} {last.name}"
