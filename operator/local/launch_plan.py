"""Pod templates to local processes: the container's env and command, its volumes mapped to
local directories, every peer's DNS name and container port mapped to a loopback port.

Local mode runs exactly what the operator's builders render. Only what cannot exist on one
machine is translated: mount paths, pod DNS names, container ports (each process needs its
own), the downward API, and the devices a process may use.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from distgnn_api.contract import (
    ENV_ROLE,
    ENV_SAMPLER_ADDRS,
    ENV_TRAINER_ADDRS,
    SETTINGS_PREFIX,
    ContractError,
    Role,
    WorkloadEnv,
    pod_name,
)
from distgnn_operator.local.loopback import LocalModeError, LoopbackNetwork
from distgnn_operator.local.pod_sources import PodSources, PodView, expand, map_path
from distgnn_operator.local.ports import LOOPBACK

GPU_RESOURCE = "nvidia.com/gpu"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
# Env vars of the host that a local process must not inherit: the pod would not have them.
_HOST_ENV_PREFIXES = (SETTINGS_PREFIX,)
_PYTHON_COMMANDS = frozenset(
    {"python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
)


@dataclass(frozen=True)
class ProcessSpec:
    """One local process standing in for one pod's container."""

    role: Role
    rank: int
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    log_path: Path

    @property
    def name(self) -> str:
        """The role and rank, as the user reads them: trainer-1."""
        return f"{self.role.value}-{self.rank}"

    def with_contract(self, **changes: Any) -> ProcessSpec:
        """This process with fields of its contract changed (e.g. ``rendezvous_timeout_s``,
        ``extra`` tuning variables), written back by the contract's one writer."""
        contract = replace(WorkloadEnv.from_environ(self.env), **changes)
        return replace(self, env={**self.env, **contract.to_environ()})


@dataclass(frozen=True)
class LocalLayout:
    """Where a local run keeps its files and what this machine offers it."""

    job_name: str
    namespace: str
    data_dir: Path
    run_dir: Path
    gpus: tuple[str, ...] = ()
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    metrics_address: str = LOOPBACK
    """Interface the processes' metrics listeners bind (pods bind all of them)."""

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"


def _loopback_interface() -> str | None:
    names = {name for _, name in socket.if_nameindex()}
    return next((n for n in ("lo", "lo0") if n in names), None)


class LaunchPlanner:
    """Turns the workload's rendered Job and StatefulSets into local process specs."""

    def __init__(self, layout: LocalLayout, config_maps: Sequence[Mapping[str, Any]]) -> None:
        self.layout = layout
        self.network = LoopbackNetwork(layout.job_name, layout.namespace)
        self._sources = PodSources(layout.data_dir, layout.run_dir, config_maps)
        self._lo = _loopback_interface()
        self._procs_per_trainer = 1

    # ------------------------------------------------------------------ pods

    def register(self, manifest: Mapping[str, Any], role: Role) -> None:
        """Make a workload's pods reachable by name, and check its devices, before any
        process is planned."""
        for rank in range(_replicas(manifest)):
            self.network.add_pod(role, rank)
        if role is Role.trainer:
            gpus = _gpus_per_pod(manifest)
            self._check_gpus(_replicas(manifest), gpus)
            self._procs_per_trainer = gpus if gpus and self.layout.gpus else 1

    def processes(
        self, manifest: Mapping[str, Any], role: Role, *, threads: int
    ) -> list[ProcessSpec]:
        """One process per pod of a Job (one pod) or StatefulSet (``spec.replicas`` pods)."""
        self.register(manifest, role)
        template = manifest["spec"]["template"]
        kind = manifest.get("kind", "")
        replicas = _replicas(manifest)
        containers = template["spec"].get("containers", [])
        if len(containers) != 1:
            raise LocalModeError(
                f"{kind} {manifest['metadata']['name']}: spec.template.spec.containers has "
                f"{len(containers)} containers; local mode runs exactly one per pod"
            )
        gpus_per_pod = _gpus_per_pod(manifest)
        specs = []
        for rank in range(replicas):
            name = (
                pod_name(self.layout.job_name, role, rank)
                if kind == "StatefulSet"
                else f"{manifest['metadata']['name']}-local"
            )
            labels = dict(template.get("metadata", {}).get("labels", {}))
            if kind == "StatefulSet":
                labels[POD_INDEX_LABEL] = str(rank)
                labels[STS_POD_NAME_LABEL] = name
            else:
                labels[JOB_INDEX_LABEL] = "0"
            pod = PodView(
                name=name,
                namespace=self.layout.namespace,
                labels=labels,
                annotations=dict(template.get("metadata", {}).get("annotations", {})),
                spec=template["spec"],
            )
            specs.append(
                self._process(pod, containers[0], role, rank, gpus_per_pod, threads=threads)
            )
        return specs

    def _check_gpus(self, replicas: int, gpus_per_pod: int) -> None:
        """Trainers need a GPU each (NCCL refuses two ranks on one); fail before any process."""
        have = len(self.layout.gpus)
        if gpus_per_pod and have and replicas * gpus_per_pod > have:
            raise LocalModeError(
                f"spec.trainers: {replicas} trainers x {gpus_per_pod} GPUs need "
                f"{replicas * gpus_per_pod} GPUs, and this machine has {have}; lower "
                "trainers.replicas or trainers.gpusPerPod, or pass --gpus 0 to train on CPU"
            )

    def _devices(self, role: Role, rank: int, gpus_per_pod: int) -> list[str]:
        gpus = self.layout.gpus
        if not gpus_per_pod or not gpus:
            return []
        if role is Role.trainer:
            return list(gpus[rank * gpus_per_pod : (rank + 1) * gpus_per_pod])
        # Samplers share the GPUs round-robin; they take no part in NCCL.
        return [gpus[(rank * gpus_per_pod + i) % len(gpus)] for i in range(gpus_per_pod)]

    # ------------------------------------------------------------------ one container

    def _process(
        self,
        pod: PodView,
        container: Mapping[str, Any],
        role: Role,
        rank: int,
        gpus_per_pod: int,
        *,
        threads: int,
    ) -> ProcessSpec:
        cname = container.get("name", "?")
        where = f"pod {pod.name} container {cname}"
        mounts = self._sources.mounts(pod, container, where)
        env = self._sources.env(pod, container, where)

        devices = self._devices(role, rank, gpus_per_pod)
        contract = self._local_contract(env, role, rank, devices, mounts, where)
        for var, value in list(env.items()):
            if var not in contract:
                env[var] = map_path(self.network.rewrite_addresses(var, value), mounts)
        env.update(contract)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)

        command = [expand(x, env) for x in container.get("command", [])]
        args = [expand(x, env) for x in container.get("args", [])]
        if not command:
            raise LocalModeError(
                f"{where}: no command; local mode runs the container's command and cannot "
                "read an image entrypoint"
            )
        argv = [map_path(x, mounts) for x in command + args]
        if argv[0] in _PYTHON_COMMANDS:
            argv[0] = sys.executable

        full_env = {k: v for k, v in os.environ.items() if not k.startswith(_HOST_ENV_PREFIXES)}
        full_env["PYTHONUNBUFFERED"] = "1"
        if self._lo:
            # Keep gloo and TensorPipe on loopback: the local run needs no network.
            full_env.setdefault("GLOO_SOCKET_IFNAME", self._lo)
            full_env.setdefault("TP_SOCKET_IFNAME", self._lo)
            full_env.setdefault("NCCL_SOCKET_IFNAME", self._lo)
        if "OMP_NUM_THREADS" not in env and "OMP_NUM_THREADS" not in full_env:
            full_env["OMP_NUM_THREADS"] = str(max(1, threads))
        full_env.update(env)

        working_dir = container.get("workingDir")
        cwd = Path(map_path(working_dir, mounts)) if working_dir else self.layout.run_dir
        return ProcessSpec(
            role=role,
            rank=rank,
            argv=tuple(argv),
            env=full_env,
            cwd=cwd,
            log_path=self.layout.log_dir / f"{role.value}-{rank}.log",
        )

    def _local_contract(
        self,
        env: Mapping[str, str],
        role: Role,
        rank: int,
        devices: Sequence[str],
        mounts: Sequence[tuple[str, Path]],
        where: str,
    ) -> dict[str, str]:
        """The contract the pod was rendered with, rewritten for this machine by its writer:
        volume paths mapped, peers and ports on loopback, the devices this process gets.
        Empty for a container that carries no contract (no ENV_ROLE)."""
        if ENV_ROLE not in env:
            return {}
        try:
            rendered = WorkloadEnv.from_environ(env)
        except ContractError as err:
            raise LocalModeError(f"{where}: {err}") from None

        def local_path(path: Path) -> Path:
            return Path(map_path(str(path), mounts))

        local = replace(
            rendered,
            trainer_addrs=self.network.addresses(ENV_TRAINER_ADDRS, rendered.trainer_addrs),
            sampler_addrs=self.network.addresses(ENV_SAMPLER_ADDRS, rendered.sampler_addrs),
            ddp_port=self.network.port(Role.trainer, 0, rendered.ddp_port),
            metrics_port=self.network.port(role, rank, rendered.metrics_port),
            data_dir=local_path(rendered.data_dir),
            partition_dir=local_path(rendered.partition_dir),
            # --run-dir may move the run off the data dir; the default maps to the same path.
            run_dir=self.layout.run_dir,
            config_path=local_path(rendered.config_path),
            device="cuda" if devices else "cpu",
            # Training processes per trainer pod: one per GPU it gets here, else one.
            procs_per_pod=self._procs_per_trainer,
            metrics_address=self.layout.metrics_address,
            # The pod's termination message file: beside the process's log.
            termination_log=(
                self.layout.log_dir / f"{role.value}-{rank}.termination"
                if rendered.termination_log is not None
                else None
            ),
        )
        return local.to_environ()


def _gpus_per_pod(manifest: Mapping[str, Any]) -> int:
    containers = manifest["spec"]["template"]["spec"].get("containers", [])
    return max(
        (int(c.get("resources", {}).get("limits", {}).get(GPU_RESOURCE, 0)) for c in containers),
        default=0,
    )


def _replicas(manifest: Mapping[str, Any]) -> int:
    if manifest.get("kind") == "StatefulSet":
        return int(manifest["spec"].get("replicas", 1))
    return 1
