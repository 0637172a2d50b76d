"""The contract between the operator and the workload: env vars, paths, ports and names.

The operator's builders write these into every pod; the workload's entry points
(``python -m distgnn_workload.partitioner|sampler|trainer``) read them back with
:meth:`WorkloadEnv.from_environ`. ``distgnn run`` writes the same variables for local
processes, with the volume mapped to a local directory and every peer address mapped to a
loopback port. Nothing here imports torch, kopf or kubernetes.
The job config and partition key (``job_config``) and what the workload reports back
(``reports``: result.json, partition figures, progress events) are re-exported here.

On the shared volume (mounted at ``DATA_MOUNT_PATH``)::

    <data>/
    ├── datasets/...                 user datasets (OGB raw dirs, PyG files)
    ├── partitions/<key>/            one partition set, see distgnn_workload.partition
    │   └── _SUCCESS                 written last: the set is complete
    └── runs/<job-uid>/              one job run
        ├── job.json                 the job config as trained
        ├── checkpoints/             epoch-<n>.pt and latest.json
        ├── result.json              written by trainer 0 on success
        └── logs/                    per-process logs (local mode)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from distgnn_api.job_config import PARTITION_FORMAT_VERSION as PARTITION_FORMAT_VERSION
from distgnn_api.job_config import JobConfig as JobConfig
from distgnn_api.job_config import job_config_json as job_config_json
from distgnn_api.job_config import load_job_config as load_job_config
from distgnn_api.job_config import partition_key as partition_key
from distgnn_api.ports import DDP_PORT as DDP_PORT  # the fixed ports live with the spec's rule
from distgnn_api.ports import RPC_PORT as RPC_PORT
from distgnn_api.reports import PROGRESS_LINE_PREFIX as PROGRESS_LINE_PREFIX
from distgnn_api.reports import PROGRESS_PATH as PROGRESS_PATH
from distgnn_api.reports import STAGE_EPOCH as STAGE_EPOCH
from distgnn_api.reports import STAGE_EVAL as STAGE_EVAL
from distgnn_api.reports import STAGE_GENERATE as STAGE_GENERATE
from distgnn_api.reports import STAGE_LOAD as STAGE_LOAD
from distgnn_api.reports import STAGE_PARTITION as STAGE_PARTITION
from distgnn_api.reports import LinkFigures as LinkFigures
from distgnn_api.reports import PartitionFigures as PartitionFigures
from distgnn_api.reports import ProgressEvent as ProgressEvent
from distgnn_api.reports import Result as Result
from distgnn_api.reports import dump_json as dump_json
from distgnn_api.reports import emit_progress as emit_progress
from distgnn_api.reports import parse_progress_line as parse_progress_line
from distgnn_api.reports import rfc3339_now as rfc3339_now

# --------------------------------------------------------------------------- roles


class Role(StrEnum):
    """A workload process role; each is a module entry point of the workload package."""

    partitioner = "partition"  # (not `partition`: str.partition is a method)
    sampler = "sampler"
    trainer = "trainer"


WORKLOAD_PACKAGE = "distgnn_workload"


def role_module(role: Role) -> str:
    """The module that ``python -m`` runs for a role: the role's package, named as the role
    (``distgnn_workload.partitioner``; ``distgnn_workload.partition`` is its library)."""
    return f"{WORKLOAD_PACKAGE}.{role.name}"


# --------------------------------------------------------------------------- env vars

SETTINGS_PREFIX = "DISTGNN_"
"""Every setting of the contract is named with it."""
ENV_ROLE = "DISTGNN_ROLE"  # partition | sampler | trainer
ENV_RANK = "DISTGNN_RANK"  # pod ordinal within its role (StatefulSet pod index)
ENV_NUM_TRAINERS = "DISTGNN_NUM_TRAINERS"  # trainer pods
ENV_NUM_SAMPLERS = "DISTGNN_NUM_SAMPLERS"  # sampler pods; 0 is worker mode
ENV_PROCS_PER_POD = "DISTGNN_PROCS_PER_POD"  # training processes per trainer pod (GPUs, or 1)
ENV_TRAINER_ADDRS = "DISTGNN_TRAINER_ADDRS"  # comma list host:port of trainer pods, by rank
ENV_SAMPLER_ADDRS = "DISTGNN_SAMPLER_ADDRS"  # comma list host:port of sampler pods, by rank
ENV_DDP_PORT = "DISTGNN_DDP_PORT"  # trainer 0's torch.distributed store port
ENV_METRICS_PORT = "DISTGNN_METRICS_PORT"  # this process's Prometheus port
ENV_METRICS_ADDRESS = "DISTGNN_METRICS_ADDRESS"  # interface it binds; unset: all (pods)
ENV_TERMINATION_LOG = "DISTGNN_TERMINATION_LOG"  # file for the partition figures; unset: none
ENV_DATA_DIR = "DISTGNN_DATA_DIR"  # mount path of the shared volume
ENV_PARTITION_DIR = "DISTGNN_PARTITION_DIR"  # <data>/partitions/<key>
ENV_RUN_DIR = "DISTGNN_RUN_DIR"  # <data>/runs/<job-uid>
ENV_CONFIG = "DISTGNN_CONFIG"  # path of the job config JSON (a ConfigMap mount)
ENV_JOB_NAME = "DISTGNN_JOB_NAME"  # metadata.name of the DistGNNJob
ENV_JOB_UID = "DISTGNN_JOB_UID"  # metadata.uid of the DistGNNJob
ENV_NAMESPACE = "DISTGNN_NAMESPACE"  # namespace of the DistGNNJob
ENV_DEVICE = "DISTGNN_DEVICE"  # cuda | cpu; unset picks cuda when available
ENV_RENDEZVOUS_TIMEOUT = "DISTGNN_RENDEZVOUS_TIMEOUT"  # seconds to wait for peers
ENV_NODE_NAME = "DISTGNN_NODE_NAME"  # the Kubernetes node of the pod (downward API)
ENV_SHUTDOWN_TIMEOUT = "DISTGNN_SHUTDOWN_TIMEOUT"  # seconds every role has to leave at the end

# Settings: optional DISTGNN_* variables a workload process reads when it needs them, through
# WorkloadEnv.setting; `distgnn run` and the benchmarks write them through WorkloadEnv.extra.
ENV_LOG_LEVEL = "DISTGNN_LOG_LEVEL"  # workload log level (DEBUG, INFO, WARNING)
ENV_RPC_CUDA = "DISTGNN_RPC_CUDA"  # 1: CUDA tensors over RPC where every peer has a GPU
ENV_CUDA_GRAPH = "DISTGNN_CUDA_GRAPH"  # 0: eager steps; static: fixed shapes, also on CPU
ENV_OVERLAP_ALLREDUCE = "DISTGNN_OVERLAP_ALLREDUCE"  # graph step's all-reduce: hooks|graph|0
ENV_PROFILE_DIR = "DISTGNN_PROFILE_DIR"  # set: rank 0 profiles some steps of its first epoch
ENV_HOST_THREADS = "DISTGNN_HOST_THREADS"  # threads of host-side array work; unset: usable CPUs
ENV_LOCAL_RANK = "DISTGNN_LOCAL_RANK"  # set by a trainer pod's supervisor for each process
ENV_PROGRESS_FILE = "DISTGNN_PROGRESS_FILE"  # where local rank 0 mirrors its progress
SETTINGS = (
    ENV_LOG_LEVEL,
    ENV_RPC_CUDA,
    ENV_CUDA_GRAPH,
    ENV_OVERLAP_ALLREDUCE,
    ENV_PROFILE_DIR,
    ENV_HOST_THREADS,
    ENV_LOCAL_RANK,
    ENV_PROGRESS_FILE,
)
"""Every optional setting of a workload process: :meth:`WorkloadEnv.setting` reads no other."""

# --------------------------------------------------------------------------- paths, ports

DATA_MOUNT_PATH = "/var/lib/distgnn"  # the shared volume inside pods
CONFIG_MOUNT_DIR = "/etc/distgnn"  # the ConfigMap holding the job config
CONFIG_FILE_NAME = "job.json"  # key of the job config in that ConfigMap
SHM_MOUNT_PATH = "/dev/shm"  # memory-backed emptyDir for torch's shared memory

DEFAULT_METRICS_PORT = 9400  # Prometheus /metrics and /progress
TERMINATION_LOG_PATH = "/dev/termination-log"  # the partition container's terminationMessagePath
DEFAULT_RENDEZVOUS_TIMEOUT_S = 600.0
DEFAULT_SHUTDOWN_TIMEOUT_S = 10.0

PARTITIONS_DIR = "partitions"
RUNS_DIR = "runs"
SUCCESS_MARKER = "_SUCCESS"
RESULT_FILE = "result.json"
CHECKPOINT_DIR = "checkpoints"
LOG_DIR = "logs"

EXIT_OK = 0  # finished, or found its work already done
EXIT_INTERNAL_ERROR = 1  # a bug or an environment failure; a gang restart may help
EXIT_BAD_INPUT = 2  # the dataset or job config is invalid; restarting cannot help


def partition_dir(data_dir: str | Path, key: str) -> Path:
    """Directory of one partition set on the volume."""
    return Path(data_dir) / PARTITIONS_DIR / key


def run_dir(data_dir: str | Path, job_uid: str) -> Path:
    """Directory of one job run on the volume."""
    return Path(data_dir) / RUNS_DIR / job_uid


def partitions_of_holder(holder: int, num_partitions: int, num_holders: int) -> list[int]:
    """Partitions owned by one holder (sampler, or trainer in worker mode): a contiguous block."""
    per = num_partitions // num_holders
    return list(range(holder * per, (holder + 1) * per))


def holder_of_partition(partition: int, num_partitions: int, num_holders: int) -> int:
    """The holder that owns a partition; the inverse of partitions_of_holder."""
    return partition // (num_partitions // num_holders)


# --------------------------------------------------------------------------- names


def statefulset_name(job_name: str, role: Role) -> str:
    """StatefulSet of a role: <job>-sampler or <job>-trainer."""
    return f"{job_name}-{role.value}"


def service_name(job_name: str) -> str:
    """Headless Service that governs both StatefulSets."""
    return f"{job_name}-peers"


def pod_name(job_name: str, role: Role, rank: int) -> str:
    """Pod of a role's rank: the StatefulSet's pod of that ordinal."""
    return f"{statefulset_name(job_name, role)}-{rank}"


def pod_dns_name(job_name: str, role: Role, rank: int, namespace: str) -> str:
    """Stable DNS name of a pod through the headless Service."""
    return f"{pod_name(job_name, role, rank)}.{service_name(job_name)}.{namespace}.svc"


def peer_addrs(job_name: str, role: Role, replicas: int, namespace: str, port: int) -> str:
    """The ENV_*_ADDRS value for a role: host:port of every pod by rank."""
    return ",".join(f"{pod_dns_name(job_name, role, r, namespace)}:{port}" for r in range(replicas))


# --------------------------------------------------------------------------- env reader, writer


class ContractError(RuntimeError):
    """The environment does not satisfy the contract; the message names the variable."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_addrs(value: str, var: str) -> tuple[Address, ...]:
    out: list[Address] = []
    for item in filter(None, (x.strip() for x in value.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ContractError(f"{var}: {item!r} is not host:port")
        out.append(Address(host, int(port)))
    return tuple(out)


@dataclass(frozen=True)
class WorkloadEnv:
    """Everything a workload process learns from its environment."""

    role: Role
    rank: int
    num_trainers: int
    num_samplers: int
    procs_per_pod: int
    trainer_addrs: tuple[Address, ...]
    sampler_addrs: tuple[Address, ...]
    ddp_port: int
    metrics_port: int
    data_dir: Path
    partition_dir: Path
    run_dir: Path
    config_path: Path
    job_name: str
    job_uid: str
    namespace: str
    device: str | None = None
    rendezvous_timeout_s: float = DEFAULT_RENDEZVOUS_TIMEOUT_S
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S
    node_name: str | None = None
    metrics_address: str | None = None
    """Interface the metrics listener binds; None binds all (pods)."""
    termination_log: Path | None = None
    """File for the partition Job's figures (its termination message); None writes none."""
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def worker_mode(self) -> bool:
        return self.num_samplers == 0

    @staticmethod
    def setting(var: str, environ: Mapping[str, str] | None = None) -> str | None:
        """One of the optional :data:`SETTINGS` of this process, read now (the caller
        parses it and names ``var`` in its error); None when unset or empty."""
        if var not in SETTINGS:
            raise ContractError(
                f"{var} is not a setting of the contract; add it to SETTINGS "
                f"({', '.join(SETTINGS)})"
            )
        value = (os.environ if environ is None else environ).get(var, "").strip()
        return value or None

    def to_environ(self) -> dict[str, str]:
        """The contract as env vars, in a stable order: the only writer of the contract's env.

        :meth:`from_environ` reads it back to an equal value (``extra`` holds further
        ``DISTGNN_*`` tuning variables, written after the contract's and never over them).
        """
        out = {
            ENV_ROLE: self.role.value,
            ENV_RANK: str(self.rank),
            ENV_NUM_TRAINERS: str(self.num_trainers),
            ENV_NUM_SAMPLERS: str(self.num_samplers),
            ENV_PROCS_PER_POD: str(self.procs_per_pod),
            ENV_TRAINER_ADDRS: ",".join(map(str, self.trainer_addrs)),
            ENV_SAMPLER_ADDRS: ",".join(map(str, self.sampler_addrs)),
            ENV_DDP_PORT: str(self.ddp_port),
            ENV_METRICS_PORT: str(self.metrics_port),
            ENV_DATA_DIR: str(self.data_dir),
            ENV_PARTITION_DIR: str(self.partition_dir),
            ENV_RUN_DIR: str(self.run_dir),
            ENV_CONFIG: str(self.config_path),
            ENV_JOB_NAME: self.job_name,
            ENV_JOB_UID: self.job_uid,
            ENV_NAMESPACE: self.namespace,
        }
        if self.device is not None:
            out[ENV_DEVICE] = self.device
        out[ENV_RENDEZVOUS_TIMEOUT] = str(self.rendezvous_timeout_s)
        out[ENV_SHUTDOWN_TIMEOUT] = str(self.shutdown_timeout_s)
        if self.node_name is not None:
            out[ENV_NODE_NAME] = self.node_name
        if self.metrics_address is not None:
            out[ENV_METRICS_ADDRESS] = self.metrics_address
        if self.termination_log is not None:
            out[ENV_TERMINATION_LOG] = str(self.termination_log)
        clash = sorted(set(self.extra) & set(out))
        if clash:
            raise ContractError(
                f"WorkloadEnv.extra sets {', '.join(clash)}, which the contract's own fields "
                "write; set the field instead"
            )
        out.update(self.extra)
        return out

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> WorkloadEnv:
        """Read the contract from the environment; a missing or bad variable is named."""
        env = os.environ if environ is None else environ

        def get(var: str, default: str | None = None) -> str:
            value = env.get(var, default)
            if value is None or value == "":
                raise ContractError(f"{var} is not set; the operator or `distgnn run` sets it")
            return value

        def get_int(var: str, default: str | None = None, minimum: int = 0) -> int:
            raw = get(var, default)
            try:
                value = int(raw)
            except ValueError:
                raise ContractError(f"{var}={raw!r} is not an integer") from None
            if value < minimum:
                raise ContractError(f"{var}={value} must be at least {minimum}")
            return value

        role_raw = get(ENV_ROLE)
        try:
            role = Role(role_raw)
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise ContractError(f"{ENV_ROLE}={role_raw!r} is not one of {roles}") from None
        data = Path(get(ENV_DATA_DIR, DATA_MOUNT_PATH))

        def get_seconds(var: str, default: float) -> float:
            raw = get(var, str(default))
            try:
                value = float(raw)
            except ValueError:
                raise ContractError(f"{var}={raw!r} is not a number of seconds") from None
            if value <= 0:
                raise ContractError(f"{var}={value} must be a positive number of seconds")
            return value

        timeout = get_seconds(ENV_RENDEZVOUS_TIMEOUT, DEFAULT_RENDEZVOUS_TIMEOUT_S)
        return cls(
            role=role,
            rank=get_int(ENV_RANK, "0"),
            num_trainers=get_int(ENV_NUM_TRAINERS, "1", minimum=1),
            num_samplers=get_int(ENV_NUM_SAMPLERS, "0"),
            procs_per_pod=get_int(ENV_PROCS_PER_POD, "1", minimum=1),
            trainer_addrs=parse_addrs(env.get(ENV_TRAINER_ADDRS, ""), ENV_TRAINER_ADDRS),
            sampler_addrs=parse_addrs(env.get(ENV_SAMPLER_ADDRS, ""), ENV_SAMPLER_ADDRS),
            ddp_port=get_int(ENV_DDP_PORT, str(DDP_PORT)),
            metrics_port=get_int(ENV_METRICS_PORT, str(DEFAULT_METRICS_PORT)),
            data_dir=data,
            partition_dir=Path(get(ENV_PARTITION_DIR)),
            run_dir=Path(get(ENV_RUN_DIR)),
            config_path=Path(get(ENV_CONFIG, f"{CONFIG_MOUNT_DIR}/{CONFIG_FILE_NAME}")),
            job_name=get(ENV_JOB_NAME),
            job_uid=get(ENV_JOB_UID),
            namespace=get(ENV_NAMESPACE, "default"),
            device=env.get(ENV_DEVICE) or None,
            rendezvous_timeout_s=timeout,
            shutdown_timeout_s=get_seconds(ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_S),
            node_name=env.get(ENV_NODE_NAME) or None,
            metrics_address=env.get(ENV_METRICS_ADDRESS) or None,
            termination_log=Path(env[ENV_TERMINATION_LOG])
            if env.get(ENV_TERMINATION_LOG)
            else None,
        )
