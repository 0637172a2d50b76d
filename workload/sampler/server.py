"""The sampler server: serves sampled, feature-complete mini-batches over torch RPC.

A trainer calls :func:`serve_batch` with the seeds of one mini-batch (all owned by this
sampler, see :mod:`distgnn_workload.runtime.seeds`). The call returns at once with a future
(``rpc.functions.async_execution``); ``samplers.concurrency`` worker threads, each with its
own sampler and CUDA stream, sample the subgraph, gather its features (local rows, the hot
cache, and other samplers over RPC for the rest) and complete the future. RPC threads are
therefore never blocked by sampling, and a sampler fetching features from another sampler
cannot deadlock with it.

The server runs until every trainer has finished (a graceful RPC shutdown is a barrier of
all processes). If trainer 0 goes away first, the job is being restarted: it exits 1 so
that the gang restarts together, or 0 if the job's result exists.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
import torch.distributed.rpc as rpc
from torch import Tensor
from torch.futures import Future

from distgnn_api.contract import EXIT_INTERNAL_ERROR, EXIT_OK, WorkloadEnv
from distgnn_workload import metrics
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime import holder as holders
from distgnn_workload.runtime import rpc as rpc_runtime
from distgnn_workload.runtime.batches import WireBatch, pack, wire_bytes
from distgnn_workload.runtime.ddp import pick_device
from distgnn_workload.runtime.features import set_serve_observer
from distgnn_workload.runtime.lifecycle import (
    BadInputError,
    configure_logging,
    finished_result,
    load_config,
)
from distgnn_workload.runtime.rendezvous import StoreWatchdog, rendezvous
from distgnn_workload.runtime.status_server import StatusServer
from distgnn_workload.sampling import NeighborSampler

log = logging.getLogger(__name__)

CACHE_RATIO_EVERY = 32
"""Update the cache hit-ratio gauge every this many requests."""


class SamplerServer:
    """Serves mini-batch requests from a pool of sampling threads."""

    def __init__(
        self,
        holder: holders.Holder,
        ctx: rpc_runtime.RpcContext,
        *,
        rank: int,
        concurrency: int,
        seed: int,
    ) -> None:
        self.holder = holder
        self.ctx = ctx
        self.rank = rank
        self.seed = seed
        self.device = holder.state.device
        self.labels = holder.state.labels
        self.executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="sample")
        self._threads = threading.local()
        self._thread_index = itertools.count()
        self._lock = threading.Lock()
        self._served = 0
        self._lookups = 0
        self._hits = 0
        label = str(rank)
        self._requests = metrics.SAMPLER_REQUESTS.labels(label, "batch")
        self._seconds = metrics.SAMPLER_REQUEST_SECONDS.labels(label, "batch")
        self._bytes = metrics.SAMPLER_BYTES_SENT.labels(label)
        self._hit_ratio = metrics.SAMPLER_CACHE_HIT_RATIO.labels(label)

    def submit(self, seeds: Tensor) -> Future[WireBatch]:
        devices: list[int | str | torch.device] | None = [self.device] if self.ctx.cuda else None
        fut: Future[WireBatch] = Future(devices=devices)
        self.executor.submit(self._run, seeds, fut, time.perf_counter())
        return fut

    def _thread_state(self) -> tuple[NeighborSampler, torch.cuda.Stream | None]:
        state: tuple[NeighborSampler, torch.cuda.Stream | None] | None = getattr(
            self._threads, "state", None
        )
        if state is None:
            seed = self.seed * 7_919 + next(self._thread_index)
            stream = None
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
                stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]
            state = (self.holder.new_sampler(seed), stream)
            self._threads.state = state
        return state

    def _run(self, seeds: Tensor, fut: Future[WireBatch], t0: float) -> None:
        try:
            sampler, stream = self._thread_state()
            ctx: AbstractContextManager[Any] = (
                torch.cuda.stream(stream) if stream is not None else nullcontext()
            )
            with ctx:
                hop = sampler.sample(seeds)
                x = self.holder.features.gather(hop.node_ids)
                y = self.labels[hop.seed_ids]
                wire = pack(hop, x, y, self.ctx.wire)
                fut.set_result(wire)
        except BaseException as err:
            log.exception("mini-batch request failed")
            fut.set_exception(err)  # type: ignore[arg-type]
            return
        self._requests.inc()
        self._seconds.observe(time.perf_counter() - t0)
        self._bytes.inc(wire_bytes(wire))
        with self._lock:
            self._served += 1
            update = self._served % CACHE_RATIO_EVERY == 0
        if update:
            self.update_cache_ratio()

    def update_cache_ratio(self) -> None:
        lookups, hits, _ = self.holder.features.stats.take()
        with self._lock:
            self._lookups += lookups
            self._hits += hits
            ratio = self._hits / self._lookups if self._lookups else 1.0
        self._hit_ratio.set(ratio)


_server: SamplerServer | None = None
_ready = threading.Event()


@rpc.functions.async_execution  # type: ignore[untyped-decorator]
def serve_batch(seeds: Tensor) -> Future[WireBatch]:
    """RPC target: the mini-batch of ``seeds`` (a future completed by a sampling thread)."""
    if not _ready.wait(timeout=600):
        raise RuntimeError("the sampler server never became ready")
    assert _server is not None
    return _server.submit(seeds)


def main() -> int:
    """Run one sampler pod."""
    env = WorkloadEnv.from_environ()
    configure_logging(f"sampler-{env.rank}")
    config = load_config(env)
    if finished_result(env.run_dir, env.job_uid) is not None:
        log.info("the job's result exists: training is complete, nothing to serve")
        return EXIT_OK
    spec = config.spec
    if env.num_samplers == 0 or spec.samplers.replicas == 0:
        raise BadInputError(
            "a sampler was started for a job in worker mode (samplers.replicas is 0)"
        )
    torch.set_num_threads(spec.samplers.workers)
    device = pick_device(env)
    StatusServer(env.metrics_port).start()
    store = PartitionStore.open(env.partition_dir)
    state = holders.load(store, spec, env.rank, env.num_samplers, device)

    group = rendezvous(env, device=str(device))
    ctx = rpc_runtime.init_rpc(
        group, device, num_worker_threads=max(16, 2 * spec.samplers.concurrency + 8)
    )

    def on_lost(reason: str) -> None:
        done = finished_result(env.run_dir, env.job_uid) is not None
        if done:
            log.info("trainers finished (%s)", reason)
        else:
            log.error("%s; exiting so that the job restarts together", reason)
        logging.shutdown()
        os._exit(EXIT_OK if done else EXIT_INTERNAL_ERROR)

    watchdog = StoreWatchdog(group, on_lost).start()
    label = str(env.rank)
    feature_requests = metrics.SAMPLER_REQUESTS.labels(label, "features")
    feature_bytes = metrics.SAMPLER_BYTES_SENT.labels(label)

    def observe(rows: Tensor) -> None:
        feature_requests.inc()
        feature_bytes.inc(rows.numel() * rows.element_size())

    set_serve_observer(observe)
    holder = holders.connect(
        state,
        store,
        spec,
        ctx,
        lambda h: f"sampler-{h}",
        seed=spec.training.seed * 1_000 + env.rank,
    )
    global _server
    _server = SamplerServer(
        holder,
        ctx,
        rank=env.rank,
        concurrency=spec.samplers.concurrency,
        seed=spec.training.seed * 1_000 + env.rank,
    )
    _ready.set()
    log.info("sampler %d serving on %s", env.rank, device)
    rpc_runtime.shutdown(group)
    watchdog.stop()
    _server.update_cache_ratio()
    log.info("trainers finished; sampler %d exits", env.rank)
    return EXIT_OK
