"""A job's samplers and trainers as local processes, started the way ``distgnn run`` does.

The operator's builders render the job, the launch plan maps each pod to a process (the
contract's env written by ``WorkloadEnv.to_environ``, peers and ports on loopback, the
volume in a temporary directory) and the supervisor runs them. Tests write the partition
themselves, then kill, stop and restart single processes the way Kubernetes would.

Every job of this test process forks its processes from one zygote (:func:`shared_zygote`),
which imports torch and PyG once for them all instead of once per job.
"""

from __future__ import annotations

import atexit
import queue
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec
from distgnn_operator.local.devices import visible_gpus
from distgnn_operator.local.job_plan import plan_job, render_job
from distgnn_operator.local.launch_plan import LocalLayout, ProcessSpec
from distgnn_operator.local.supervisor import Exited, Notice, Progressed, Supervisor
from distgnn_operator.local.zygote import Zygote
from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition import write_partitions

Key = tuple[c.Role, int]

_ZYGOTE: list[Zygote] = []


def shared_zygote() -> Zygote:
    """The zygote of every job of this test process (its process starts with the first
    job's first process, and is stopped at exit). A job's stop ends the job's processes,
    not the zygote; one whose zygote died falls back to fresh interpreters, as any does."""
    if not _ZYGOTE:
        _ZYGOTE.append(Zygote())
        atexit.register(_ZYGOTE[0].close)
    return _ZYGOTE[0]


@dataclass
class LocalWorkload:
    """One job on this machine: its volume, plan and processes.

    ``contract`` changes fields of every process's :class:`~distgnn_api.contract.WorkloadEnv`
    (e.g. ``{"procs_per_pod": 2}``, ``{"extra": {"DISTGNN_CUDA_GRAPH": "static"}}``);
    ``env`` adds variables outside the contract (e.g. NCCL settings).
    """

    root: Path
    spec: DistGNNJobSpec
    name: str = "e2e"
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    device: str = "cpu"
    rendezvous_timeout_s: float = 120.0
    contract: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[Key, str] = field(default_factory=dict)
    """The processes started since the last ``procs.clear()``: what ``wait_all`` waits for."""

    def __post_init__(self) -> None:
        self.data_dir = self.root / "data"
        self.key = c.partition_key(self.spec)
        self.partition_dir = c.partition_dir(self.data_dir, self.key)
        self.run_dir = c.run_dir(self.data_dir, self.uid)
        gpus = tuple(visible_gpus()) if self.device == "cuda" else ()
        layout = LocalLayout(
            job_name=self.name,
            namespace="local",
            data_dir=self.data_dir,
            run_dir=self.run_dir,
            gpus=gpus,
        )
        self.log_dir = layout.log_dir
        rendered = render_job(self.name, self.uid, self.spec, partition_reused=True)
        plan = plan_job(layout, rendered, threads=1)
        changes = {"rendezvous_timeout_s": self.rendezvous_timeout_s, **self.contract}
        self.specs: dict[Key, ProcessSpec] = {}
        for spec in plan.workload:
            spec = spec.with_contract(**changes)
            self.specs[(spec.role, spec.rank)] = ProcessSpec(
                role=spec.role,
                rank=spec.rank,
                argv=spec.argv,
                env={**spec.env, **self.env},
                cwd=spec.cwd,
                log_path=spec.log_path,
            )
        self.metrics_ports = {
            key: c.WorkloadEnv.from_environ(spec.env).metrics_port
            for key, spec in self.specs.items()
        }
        # Forked from a zygote that imported torch once: these tests find their processes
        # through the supervisor, never through /proc.
        self.supervisor = Supervisor(grace_period_s=5, zygote=shared_zygote())

    def write_partitions(self, graph: GraphData) -> None:
        write_partitions(
            self.partition_dir,
            graph,
            self.spec.num_partitions,
            spec=self.spec.partition,
            key=self.key,
        )

    def start(self, role: c.Role, rank: int) -> None:
        spec = self.specs[(role, rank)]
        self.supervisor.start(spec)
        self.procs[(role, rank)] = spec.name

    def start_all(self) -> None:
        for role, rank in self.specs:  # samplers first, as the plan lists them
            self.start(role, rank)

    def poll(self, role: c.Role, rank: int) -> int | None:
        return self.supervisor.poll(self.specs[(role, rank)].name)

    def running(self) -> bool:
        """Whether any process started since the last ``procs.clear()`` still runs."""
        return any(self.supervisor.poll(name) is None for name in self.procs.values())

    def _notices(self, timeout_s: float) -> Iterator[Notice]:
        """The supervisor's notices as they come, for ``timeout_s`` at the most."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                yield self.supervisor.notices.get(timeout=left)
            except queue.Empty:
                return

    def wait_for_an_exit(self, timeout_s: float) -> None:
        """Return when a process of this job exits, or after ``timeout_s``: woken by the
        supervisor's exit notice, not by polling (an exit seen before this call may return
        it at once)."""
        for notice in self._notices(timeout_s):
            if isinstance(notice, Exited):
                return

    def wait_for_progress(
        self,
        role: c.Role,
        rank: int,
        matches: Callable[[c.ProgressEvent], bool],
        timeout_s: float,
    ) -> c.ProgressEvent:
        """The first progress line of process ``(role, rank)`` from now on that ``matches``,
        as the supervisor's reader sees it (no poll of the log); fails when a process started
        since the last ``procs.clear()`` exits first, or at the deadline."""
        name = self.specs[(role, rank)].name
        for notice in self._notices(timeout_s):
            if isinstance(notice, Exited) and notice.spec.name in self.procs.values():
                raise AssertionError(
                    f"{notice.spec.name} exited ({notice.returncode}) first\n{self.logs()}"
                )
            if (
                isinstance(notice, Progressed)
                and notice.spec.name == name
                and matches(notice.event)
            ):
                return notice.event
        raise AssertionError(f"{name} printed no such progress line in {timeout_s:.0f}s")

    def signal(self, role: c.Role, rank: int, sig: signal.Signals) -> None:
        self.supervisor.signal(self.specs[(role, rank)].name, sig)

    def wait_all(self, timeout_s: float) -> dict[Key, int]:
        """Exit codes of every process; kills whatever is still running at the deadline."""
        deadline = time.monotonic() + timeout_s
        codes: dict[Key, int] = {}
        for key, name in self.procs.items():
            code = self.supervisor.wait(name, deadline - time.monotonic())
            if code is None:
                self.supervisor.stop([name])
                code = self.supervisor.poll(name)
                assert code is not None
            codes[key] = code
        return codes

    def stop_all(self) -> None:
        """Stop every process this job started (and their groups), the shared zygote not."""
        self.supervisor.stop([spec.name for spec in self.specs.values()])

    def logs(self) -> str:
        out = []
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace")
            out.append(f"===== {path.name} =====\n{text[-6000:]}")
        return "\n".join(out)

    def log_path(self, role: c.Role, rank: int) -> Path:
        return self.specs[(role, rank)].log_path

    def stdout_of(self, role: c.Role, rank: int) -> str:
        return self.log_path(role, rank).read_text(errors="replace")
