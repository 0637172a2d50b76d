"""This holder answering other holders' feature requests (RPC targets).

Over the RPC wire, or written into the requester's shared slot; the table served is
registered in :mod:`distgnn_workload.runtime.rpc_targets`. A holder of several node types
serves a table per type (:func:`serve_tables`), requests keyed by node type.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import Tensor

from distgnn_workload.pinned_copies import to_device, to_host
from distgnn_workload.runtime import rpc_targets, shared_slots
from distgnn_workload.runtime.features.table import FeatureTable
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.runtime.rpc_targets import Target
from distgnn_workload.runtime.shared_slots import SlotSpec
from distgnn_workload.runtime.transfers import thread_stream

# --------------------------------------------------------------------------- serving

SERVED_TABLE = Target[tuple["FeatureTable", RpcContext]]("feature table")
SERVE_OBSERVER = Target[Callable[[Tensor], None] | None]("feature request observer")


def set_serve_observer(observer: Callable[[Tensor], None] | None) -> None:
    """Call ``observer(rows)`` for every feature request this process answers (metrics)."""
    rpc_targets.register(SERVE_OBSERVER, observer)


def serve_table(table: FeatureTable, ctx: RpcContext) -> None:
    """Make this process answer other holders' feature requests from ``table``."""
    rpc_targets.register(SERVED_TABLE, (table, ctx))


def _observe(rows: Tensor) -> None:
    observer = rpc_targets.find(SERVE_OBSERVER)
    if observer is not None:
        observer(rows)


_serve_streams = threading.local()


def _serve_features(ids: Tensor) -> Tensor:
    """RPC target: the features of owned nodes ``ids``.

    With CUDA tensors over RPC the rows stay on the GPU (TensorPipe orders the send after
    the gather). With host tensors they are gathered on a side stream of this RPC thread and
    copied to pinned memory, so that the copy waits for nothing but the gather (not for the
    training kernels queued on the default stream).
    """
    table, ctx = rpc_targets.get(SERVED_TABLE)
    if table.device.type == "cuda":
        # a new RPC thread starts on GPU 0: anything it creates there (a pinned buffer,
        # a stream) would open a second context on a peer's GPU
        torch.cuda.set_device(table.device)
    if ctx.cuda or table.device.type != "cuda":
        rows = ctx.wire(table.local_rows(ids))
    else:
        stream = thread_stream(_serve_streams, table.device)
        with torch.cuda.stream(stream):
            gathered = table.local_rows(to_device(ids, table.device))
            rows = torch.empty(gathered.shape, dtype=gathered.dtype, pin_memory=True)
            rows.copy_(gathered, non_blocking=True)
        stream.synchronize()
    _observe(rows)
    return rows


FEATURE_SLOTS = "rows"


def feature_slot_spec(rows: int, num_features: int, dtype: torch.dtype) -> SlotSpec:
    """One shared slot for up to ``rows`` feature rows."""
    return {FEATURE_SLOTS: ((rows, num_features), dtype)}


def _serve_features_into(consumer: str, slot: int, ids: Tensor) -> int:
    """RPC target: write the features of owned nodes ``ids`` into ``consumer``'s slot."""
    table, _ = rpc_targets.get(SERVED_TABLE)
    buffer = shared_slots.owner().buffers(consumer, slot)[FEATURE_SLOTS]
    n = int(ids.numel())
    if n > buffer.size(0):
        raise ValueError(f"{n} rows do not fit a slot of {buffer.size(0)}")
    if table.device.type != "cuda":
        buffer[:n].copy_(table.local_rows(ids))
    else:
        torch.cuda.set_device(table.device)
        stream = thread_stream(_serve_streams, table.device)
        with torch.cuda.stream(stream):
            # every kernel on this stream: the gather must not read indices that another
            # stream (this thread's default one) is still copying or computing
            # pinned: a pageable copy would queue behind any pageable copy of this process,
            # e.g. the trainer's read-back of a collective that waits for this very request
            buffer[:n].copy_(table.local_rows(to_device(ids, table.device)))
        stream.synchronize()  # the rows are in place before the answer
    _observe(buffer[:n])
    return n


# ------------------------------------------------------------ serving by node type

SERVED_TABLES = Target[dict[str, FeatureTable]]("feature tables by node type")
TYPE_SERVE_OBSERVER = Target[Callable[[str, Tensor], None]]("feature request observer by type")


def set_type_serve_observer(observer: Callable[[str, Tensor], None]) -> None:
    """Call ``observer(node_type, rows)`` for every request by node type answered (metrics)."""
    rpc_targets.register(TYPE_SERVE_OBSERVER, observer)


def serve_tables(tables: dict[str, FeatureTable]) -> None:
    """Make this process answer other holders' requests for its owned rows of each type."""
    rpc_targets.register(SERVED_TABLES, tables)


def _serve_rows_of_type(node_type: str, ids: Tensor) -> Tensor:
    """RPC target: the features of owned nodes ``ids`` of ``node_type``, in host memory.

    On a GPU table the ids go to the device through pinned memory and the rows are
    gathered on a side stream of this RPC thread and copied back to pinned memory, so the
    copy waits for nothing but the gather (:mod:`distgnn_workload.runtime.transfers`).
    """
    tables = rpc_targets.get(SERVED_TABLES)
    table = tables.get(node_type)
    if table is None:
        raise KeyError(
            f"this process serves no features of node type {node_type!r} "
            f"(it serves {sorted(tables)})"
        )
    table.owned_slots(ids)  # every id is owned, or a ValueError names the request
    ids = ids.to(torch.int64)
    if table.device.type != "cuda":
        rows = table.local_rows(ids)
    else:
        torch.cuda.set_device(table.device)  # see _serve_features
        with torch.cuda.stream(thread_stream(_serve_streams, table.device)):
            rows = to_host(table.local_rows(to_device(ids, table.device)))
    observer = rpc_targets.find(TYPE_SERVE_OBSERVER)
    if observer is not None:
        observer(node_type, rows)
    return rows
