"""The processes of ``test_workload_rpc.py`` (a module spawned children can import)."""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.distributed.rpc as rpc


class _BrokenSampler:
    def prepare(self, batch_size: int) -> None:
        pass

    def sample(self, seeds: torch.Tensor) -> Any:
        raise IndexError(f"seed {int(seeds.max())} is not a node of this partition")


def sampler_and_trainer(rank: int, port: int, out: str) -> None:
    """Rank 0: a sampler server whose sampler fails. Rank 1: a trainer asking it for batches."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    from distgnn_workload.runtime import batch_targets, rpc_targets
    from distgnn_workload.runtime.remote_batches import RemotePipeline
    from distgnn_workload.runtime.rpc import RemoteError, RpcContext, wait_remote
    from distgnn_workload.sampler import server as sampler_server

    name = "sampler-0" if rank == 0 else "trainer-0"
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=60)
    if rank == 0:
        cpu = torch.device("cpu")
        holder = SimpleNamespace(
            state=SimpleNamespace(device=cpu, labels=torch.zeros(10, dtype=torch.int64)),
            new_sampler=lambda seed: _BrokenSampler(),
        )
        server = sampler_server.SamplerServer(
            holder,  # type: ignore[arg-type]
            RpcContext(None, cpu, cuda=False),  # type: ignore[arg-type]
            rank=0,
            concurrency=2,
            seed=0,
            batch_size=8,
        )
        rpc_targets.register(batch_targets.SAMPLER_SERVER, server)
    rpc.init_rpc(name, rank=rank, world_size=2, rpc_backend_options=options)  # type: ignore[no-untyped-call]
    lines = []
    if rank == 1:
        fut = rpc.rpc_async("sampler-0", batch_targets.serve_batch, args=(torch.arange(8),))
        lines.append(f"raw value: {type(fut.wait()).__name__}")
        try:
            wait_remote(
                rpc.rpc_async("sampler-0", batch_targets.serve_batch, args=(torch.arange(8),)),
                "sampler-0",
            )
        except RemoteError as err:
            lines.append(f"wait_remote: RemoteError: {err}")

        def request(holder: int, seeds: torch.Tensor) -> Any:
            return rpc.rpc_async(f"sampler-{holder}", batch_targets.serve_batch, args=(seeds,))

        pipeline = RemotePipeline(request, device=torch.device("cpu"), prefetch=1, concurrency=2)
        try:
            for _ in pipeline.epoch([(0, torch.arange(8)), (0, torch.arange(8, 16))]):
                pass
        except Exception as err:
            lines.append(f"pipeline: {type(err).__name__}: {err}")
            lines.append("".join(traceback.format_exception_only(err)))
        Path(out).write_text("\n".join(lines))
    rpc.shutdown()
