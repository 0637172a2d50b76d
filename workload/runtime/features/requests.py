"""How a holder's requests for rows travel to their owners over RPC (sampler servers; the
trainers' exchange uses collectives instead): the rows back as the answer, by node type,
or written by the owner into the asker's shared slot. The answering side is
:mod:`~distgnn_workload.runtime.features.serving`."""

from __future__ import annotations

from collections.abc import Callable

import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_workload.runtime.features.serving import (
    _serve_features,
    _serve_features_into,
    _serve_rows_of_type,
)
from distgnn_workload.runtime.rpc import RpcContext

FetchFn = Callable[[int, Tensor], Future[Tensor]]
"""Start fetching the features of ``ids`` (int64, any device) from holder ``h``."""


def rpc_fetch(ctx: RpcContext, target_of_holder: Callable[[int], str]) -> FetchFn:
    """Feature requests over RPC: ids go as CUDA tensors where tensors travel on the GPU."""

    def fetch(holder: int, ids: Tensor) -> Future[Tensor]:
        if not ctx.cuda:
            ids = ids.cpu()
        fut: Future[Tensor] = rpc.rpc_async(target_of_holder(holder), _serve_features, args=(ids,))
        return fut

    return fetch


TypedFetchFn = Callable[[int, str, Tensor], Future[Tensor]]
"""Start fetching the rows of ``ids`` (int64, any device) of a node type from holder ``h``."""


def rpc_typed_fetch(target_of_holder: Callable[[int], str]) -> TypedFetchFn:
    """Requests by node type over RPC (host ids; rows come back in host memory)."""

    def fetch(holder: int, node_type: str, ids: Tensor) -> Future[Tensor]:
        fut: Future[Tensor] = rpc.rpc_async(
            target_of_holder(holder), _serve_rows_of_type, args=(node_type, ids.cpu())
        )
        return fut

    return fetch


def rpc_fetch_into(
    me: str, target_of_holder: Callable[[int], str]
) -> Callable[[int, int, Tensor], Future[int]]:
    """Feature requests whose rows the owner writes into this process's shared slot."""

    def fetch_into(holder: int, slot: int, ids: Tensor) -> Future[int]:
        fut: Future[int] = rpc.rpc_async(
            target_of_holder(holder), _serve_features_into, args=(me, slot, ids.cpu())
        )
        return fut

    return fetch_into
