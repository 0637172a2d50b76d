"""Runs a job's samplers and trainers as local processes with the contract's environment.

The same entry points that pods run (``python -m distgnn_workload.sampler|trainer``) get
every contract variable; peer addresses are loopback ports, the volume is a temporary
directory. Tests kill and restart processes through it the way Kubernetes would.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from distgnn_api import contract as c
from distgnn_api.spec import DistGNNJobSpec
from distgnn_workload.data.graph import GraphData
from distgnn_workload.partition import write_partitions


def free_ports(count: int) -> list[int]:
    """Ports free on loopback right now (held open together so that they differ)."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


@dataclass
class LocalWorkload:
    """One job on this machine: its volume, config, ports and processes."""

    root: Path
    spec: DistGNNJobSpec
    name: str = "e2e"
    namespace: str = "default"
    uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    device: str = "cpu"
    rendezvous_timeout_s: float = 120.0
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: dict[tuple[c.Role, int], subprocess.Popen[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = self.root / "data"
        self.key = c.partition_key(self.spec)
        self.partition_dir = c.partition_dir(self.data_dir, self.key)
        self.run_dir = c.run_dir(self.data_dir, self.uid)
        self.log_dir = self.root / "logs"
        self.config_path = self.root / "config" / c.CONFIG_FILE_NAME
        for d in (self.data_dir, self.run_dir, self.log_dir, self.config_path.parent):
            d.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            c.job_config_json(self.name, self.namespace, self.uid, self.spec)
        )
        trainers, samplers = self.spec.trainers.replicas, self.spec.samplers.replicas
        ports = free_ports(2 * (trainers + samplers) + 1)
        self.trainer_ports = ports[:trainers]
        self.sampler_ports = ports[trainers : trainers + samplers]
        self.ddp_port = ports[trainers + samplers]
        metrics = ports[trainers + samplers + 1 :]
        self.metrics_ports = {
            **{(c.Role.trainer, r): metrics[r] for r in range(trainers)},
            **{(c.Role.sampler, r): metrics[trainers + r] for r in range(samplers)},
        }

    def write_partitions(self, graph: GraphData) -> None:
        write_partitions(
            self.partition_dir,
            graph,
            self.spec.num_partitions,
            spec=self.spec.partition,
            key=self.key,
        )

    def env(self, role: c.Role, rank: int) -> dict[str, str]:
        addrs = ",".join(f"127.0.0.1:{p}" for p in self.trainer_ports)
        saddrs = ",".join(f"127.0.0.1:{p}" for p in self.sampler_ports)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
        env.update(
            {
                c.ENV_ROLE: role.value,
                c.ENV_RANK: str(rank),
                c.ENV_NUM_TRAINERS: str(self.spec.trainers.replicas),
                c.ENV_NUM_SAMPLERS: str(self.spec.samplers.replicas),
                c.ENV_PROCS_PER_POD: str(max(1, self.spec.trainers.gpus_per_pod)),
                c.ENV_TRAINER_ADDRS: addrs,
                c.ENV_SAMPLER_ADDRS: saddrs,
                c.ENV_DDP_PORT: str(self.ddp_port),
                c.ENV_METRICS_PORT: str(self.metrics_ports[(role, rank)]),
                c.ENV_DATA_DIR: str(self.data_dir),
                c.ENV_PARTITION_DIR: str(self.partition_dir),
                c.ENV_RUN_DIR: str(self.run_dir),
                c.ENV_CONFIG: str(self.config_path),
                c.ENV_JOB_NAME: self.name,
                c.ENV_JOB_UID: self.uid,
                c.ENV_NAMESPACE: self.namespace,
                c.ENV_DEVICE: self.device_of(role, rank),
                c.ENV_RENDEZVOUS_TIMEOUT: str(self.rendezvous_timeout_s),
                "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": "1",
                "GLOO_SOCKET_IFNAME": "lo",
                "TP_SOCKET_IFNAME": "lo",
                "NCCL_SOCKET_IFNAME": "lo",
                "NCCL_NVLS_ENABLE": "0",
            }
        )
        env.update(self.extra_env)
        return env

    def device_of(self, role: c.Role, rank: int) -> str:
        """One GPU per pod, round-robin over the visible GPUs (samplers like trainers)."""
        if self.device != "cuda":
            return self.device
        import torch

        return f"cuda:{rank % max(1, torch.cuda.device_count())}"

    def log_path(self, role: c.Role, rank: int) -> Path:
        return self.log_dir / f"{role.value}-{rank}.log"

    def start(self, role: c.Role, rank: int) -> subprocess.Popen[bytes]:
        log = open(self.log_path(role, rank), "ab")  # noqa: SIM115 - owned by the process
        proc = subprocess.Popen(
            [sys.executable, "-m", c.role_module(role)],
            env=self.env(role, rank),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
        )
        log.close()
        self.procs[(role, rank)] = proc
        return proc

    def start_all(self) -> None:
        for r in range(self.spec.samplers.replicas):
            self.start(c.Role.sampler, r)
        for r in range(self.spec.trainers.replicas):
            self.start(c.Role.trainer, r)

    def role_procs(self, role: c.Role) -> dict[int, subprocess.Popen[bytes]]:
        return {rank: p for (r, rank), p in self.procs.items() if r is role}

    def wait_all(self, timeout_s: float) -> dict[tuple[c.Role, int], int]:
        """Exit codes of every process; kills whatever is still running at the deadline."""
        deadline = time.monotonic() + timeout_s
        codes: dict[tuple[c.Role, int], int] = {}
        for key, proc in self.procs.items():
            try:
                codes[key] = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes[key] = -9
        return codes

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        out = []
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace")
            out.append(f"===== {path.name} =====\n{text[-6000:]}")
        return "\n".join(out)

    def stdout_of(self, role: c.Role, rank: int) -> str:
        return self.log_path(role, rank).read_text(errors="replace")
