"""One sampler process, wired: the start-up and shutdown every sampler makes, with the graph
kind deciding only what it loads and serves.

The graph kind is decided once, in :func:`serving_of`: a homogeneous job's sampler holds
its partitions (:class:`~distgnn_workload.sampler.serving.NodeServing`), a typed job's holds
its typed rows and the whole typed topology
(:class:`~distgnn_workload.sampler.serving.TypedServing`). Either loads before the
rendezvous, so that a peer's first request finds its rows, then serves until every trainer
finished (:meth:`~distgnn_workload.runtime.bootstrap.RoleProcess.serve_until_trainers_finish`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from distgnn_api.contract import EXIT_OK
from distgnn_workload import metrics
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.cuda_memory import CudaMemoryPhases, log_record
from distgnn_workload.runtime.lifecycle import BadInputError
from distgnn_workload.runtime.rpc import RpcContext
from distgnn_workload.sampler.serving import NodeServing, TypedServing

log = logging.getLogger(__name__)


class Serving(Protocol):
    """What a graph kind loads and serves in a sampler's start-up."""

    @property
    def graph_kind(self) -> str:
        """``homogeneous`` or ``typed``: what the logs call the batches served."""

    def load(self, observe: Callable[[Tensor], None]) -> None:
        """Read this sampler's share of the store; ``observe`` counts each feature request
        a peer makes of its rows."""

    def serve(self, ctx: RpcContext) -> None:
        """Build the server of the job's batches and register it as an RPC target."""

    def finish(self) -> None:
        """The trainers finished: last metrics and a summary line."""


def serving_of(proc: RoleProcess, device: torch.device) -> Serving:
    """What this sampler serves: the one place a sampler looks at the graph kind."""
    if proc.spec.dataset.hetero_section is not None:
        return TypedServing(proc, device)
    return NodeServing(proc, device)


def rpc_threads(concurrency: int) -> int:
    """RPC threads of a sampler: two per sampling thread (its batch and the feature requests
    it answers meanwhile) and room for the peers' requests."""
    return max(16, 2 * concurrency + 8)


def main(proc: RoleProcess) -> int:
    """A sampler pod's body: load its share, serve until every trainer finished, leave."""
    env = proc.env
    if proc.finished():
        log.info("the job's result exists: training is complete, nothing to serve")
        return EXIT_OK
    spec = proc.spec
    if env.num_samplers == 0 or spec.samplers.replicas == 0:
        raise BadInputError(
            "a sampler was started for a job in worker mode (samplers.replicas is 0)"
        )
    torch.set_num_threads(spec.samplers.workers)
    device = proc.pick_device()
    proc.serve_status()
    serving = serving_of(proc, device)
    label = str(env.rank)
    feature_requests = metrics.SAMPLER_REQUESTS.labels(label, "features")
    feature_bytes = metrics.SAMPLER_BYTES_SENT.labels(label)

    def observe(rows: Tensor) -> None:
        feature_requests.inc()
        feature_bytes.inc(rows.numel() * rows.element_size())

    serving.load(observe)
    proc.join(rpc_threads=rpc_threads(spec.samplers.concurrency))
    assert proc.rpc is not None
    serving.serve(proc.rpc)
    proc.serving()
    log.info("sampler %d serving %s batches on %s", env.rank, serving.graph_kind, device)
    memory = CudaMemoryPhases(device)
    log_record(log, memory, "setup")
    proc.serve_until_trainers_finish()
    log_record(log, memory, "shutdown")
    proc.leave()
    serving.finish()
    return EXIT_OK
