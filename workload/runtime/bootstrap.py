"""One workload process, from start to exit: the same life for every role.

:class:`RoleProcess` owns, in order: the contract's env and the job config, the GPU, the
metrics and progress server, the partition store, the rendezvous, the trainers' collectives,
RPC, the peer watchdog, the bounded shutdown and, through :func:`run_role`, the exit code.
A role's entry point is a body ``(RoleProcess) -> exit code`` that asks for the parts it
needs, in that order:

- partition: env, config, metrics; writes the store;
- sampler: all but the collectives; serves until every trainer finished, then leaves;
- trainer: all of it; trains, then marks itself finished and leaves.

Exit codes follow the contract (:mod:`distgnn_workload.runtime.lifecycle`): 0 done, 2 bad
input (a restart cannot help), 1 anything else. The process ends with ``os._exit``, so RPC
and NCCL threads cannot keep a finished or failed process alive.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NoReturn

from prometheus_client import REGISTRY, CollectorRegistry

from distgnn_api.contract import (
    EXIT_INTERNAL_ERROR,
    EXIT_OK,
    ContractError,
    JobConfig,
    Role,
    WorkloadEnv,
)
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.partition.store import PartitionStore
from distgnn_workload.runtime.lifecycle import (
    claim_exit,
    configure_logging,
    exit_code,
    finished_result,
    load_config,
)
from distgnn_workload.runtime.status_server import ProgressSource, StatusServer

if TYPE_CHECKING:  # the partitioner imports no torch: the parts that need it import it late
    import torch

    from distgnn_workload.runtime.ddp import Collectives
    from distgnn_workload.runtime.rendezvous import Group
    from distgnn_workload.runtime.rpc import RpcContext
    from distgnn_workload.runtime.store_watchdog import StoreWatchdog

log = logging.getLogger(__name__)


class RoleProcess:
    """The parts of one workload process, each started once and in order."""

    def __init__(
        self, role: Role, *, local_rank: int = 0, environ: Mapping[str, str] | None = None
    ) -> None:
        self.env = WorkloadEnv.from_environ(environ)
        if self.env.role is not role:
            raise ContractError(
                f"this is the {role.value} entry point but DISTGNN_ROLE is {self.env.role.value}"
            )
        self.role = role
        self.local_rank = local_rank
        self._config: JobConfig | None = None
        self._device: torch.device | None = None
        self.status: StatusServer | None = None
        self.group: Group | None = None
        self._collectives: Collectives | None = None
        self.rpc: RpcContext | None = None
        self.watchdog: StoreWatchdog | None = None

    # ------------------------------------------------------------------ identity

    @property
    def rank(self) -> int:
        """Rank within the role: pod rank x processes per pod + local rank for trainers."""
        if self.role is Role.trainer:
            return self.env.rank * self.env.procs_per_pod + self.local_rank
        return self.env.rank

    @property
    def name(self) -> str:
        return f"{self.role.value}-{self.rank}"

    @property
    def config(self) -> JobConfig:
        if self._config is None:
            self._config = load_config(self.env)
        return self._config

    @property
    def spec(self) -> DistGNNJobSpec:
        return self.config.spec

    def finished(self) -> bool:
        """Whether the job's result exists: a restarted pod of a finished job exits 0 at once."""
        return finished_result(self.env.run_dir, self.env.job_uid) is not None

    # ------------------------------------------------------------------ start-up, in order

    @property
    def device(self) -> torch.device:
        if self._device is None:
            return self.pick_device()
        return self._device

    @property
    def collectives(self) -> Collectives:
        """The trainers' control collectives (a no-op group until there are several)."""
        if self._collectives is None:
            from distgnn_workload.runtime.ddp import single_process

            self._collectives = single_process()
        return self._collectives

    def pick_device(self) -> torch.device:
        from distgnn_workload.runtime.ddp import pick_device

        self._device = pick_device(self.env, self.local_rank)
        return self._device

    def serve_status(
        self, progress: ProgressSource | None = None, registry: CollectorRegistry = REGISTRY
    ) -> StatusServer:
        """Serve ``/metrics`` (and ``/progress`` when given) on the contract's metrics port."""
        self.status = StatusServer(
            self.env.metrics_port,
            progress=progress,
            registry=registry,
            host=self.env.metrics_address or "",  # unset: every interface
        ).start()
        return self.status

    def open_store(self) -> PartitionStore:
        return PartitionStore.open(self.env.partition_dir)

    def join(self, *, rpc_threads: int = 16) -> Group:
        """Rendezvous with every process of the job, then start the collectives and RPC.

        Every process but the store's owner watches the store: when trainer 0 goes away the
        process exits at once, 0 if the job's result exists (the job is over), else 1 (the
        gang restarts together).
        """
        from distgnn_workload.runtime import rpc as rpc_runtime
        from distgnn_workload.runtime import rpc_targets
        from distgnn_workload.runtime.ddp import init_ddp
        from distgnn_workload.runtime.rendezvous import rendezvous
        from distgnn_workload.runtime.store_watchdog import StoreWatchdog

        # a peer's request waits for this process's targets at most as long as a peer
        rpc_targets.configure(wait_s=self.env.rendezvous_timeout_s)
        group = rendezvous(self.env, local_rank=self.local_rank, device=str(self.device))
        self.group = group
        if group.rpc_rank != 0:
            self.watchdog = StoreWatchdog(group, self._on_store_lost).start()
        if self.role is Role.trainer and len(group.trainers) > 1:
            self._collectives = init_ddp(group, self.device)
        self.rpc = rpc_runtime.init_rpc(group, self.device, num_worker_threads=rpc_threads)
        return group

    def _on_store_lost(self, reason: str) -> None:
        if not claim_exit(wait=False):  # the entry point is ending the process already
            return
        done = self.finished()
        if done:
            log.info("the job is over (%s)", reason)
        else:
            log.error("%s; exiting so that the job restarts together", reason)
        logging.shutdown()
        os._exit(EXIT_OK if done else EXIT_INTERNAL_ERROR)

    def serving(self) -> None:
        """Every RPC target of this process is registered: a request for another fails at once."""
        from distgnn_workload.runtime import rpc_targets

        rpc_targets.seal()

    # ------------------------------------------------------------------ the end

    def serve_until_trainers_finish(self) -> None:
        """A sampler's life after start-up: serve until every trainer is done."""
        from distgnn_workload.runtime.shutdown import wait_for_trainers

        assert self.group is not None, "join() first"
        wait_for_trainers(self.group)

    def leave(self) -> None:
        """Leave the job within ``DISTGNN_SHUTDOWN_TIMEOUT``; a trainer marks itself finished."""
        from distgnn_workload.runtime.shutdown import leave, mark_finished

        if self.group is None:
            return
        if self.role is Role.trainer:
            mark_finished(self.group)
        # From here the bounded shutdown owns the end: a store lost meanwhile is its error,
        # naming the step and the peers it waited for, not the watchdog's "the job is over".
        if self.watchdog is not None:
            self.watchdog.stop()
        leave(self.group, timeout_s=self.env.shutdown_timeout_s, rpc_running=self.rpc is not None)


Body = Callable[[RoleProcess], int]


def run_role(role: Role, body: Body, *, local_rank: int = 0) -> NoReturn:
    """Run ``body`` as this process's whole life and exit with the contract's code."""

    def main() -> int:
        proc = RoleProcess(role, local_rank=local_rank)
        configure_logging(proc.name)
        return body(proc)

    code = exit_code(main, role.value, decide=claim_exit)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
