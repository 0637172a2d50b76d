"""A benchmark run (``mode-gpus-precision[-cacheRatio][-socket]``), its job spec and its processes,
planned as ``distgnn run`` plans them: the partition step that generates the graph, and the
trainers (and samplers) on the store it wrote. The typed and link benches plan theirs here too.
"""

from __future__ import annotations

import argparse
import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bench_args import products_edges
from spec_sections import model_section, training_section

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_operator.local.job_plan import (
    JobPlan,
    UnsupportedJobError,
    check_supported,
    plan_job,
    render_job,
)
from distgnn_operator.local.launch_plan import LocalLayout

JOB_NAME = "bench"


ENV_RPC_CUDA = "DISTGNN_RPC_CUDA"


ENV_PROFILE_DIR = "DISTGNN_PROFILE_DIR"


SOCKET_ONLY_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket"}
"""NCCL limited to its socket transport: no NVLink or PCIe peer access, no shared memory (an
emulation of ranks on different hosts)."""


@dataclass(frozen=True)
class RunConfig:
    mode: str
    gpus: int
    precision: str
    cache_ratio: float
    socket: bool = False
    """NCCL over sockets only (``SOCKET_ONLY_ENV``)."""

    @property
    def name(self) -> str:
        return f"{self.mode}-{self.gpus}-{self.precision}" + ("-socket" if self.socket else "")

    @property
    def full_name(self) -> str:
        base = f"{self.mode}-{self.gpus}-{self.precision}-{self.cache_ratio:g}"
        return base + ("-socket" if self.socket else "")

    @property
    def transport(self) -> str:
        return "socket" if self.socket else "any"

    @property
    def env(self) -> dict[str, str]:
        """What this run adds to every workload process's environment."""
        return dict(SOCKET_ONLY_ENV) if self.socket else {}


def parse_run(token: str) -> RunConfig:
    """``mode-gpus-precision[-cacheRatio][-socket]``, e.g. ``worker-4-bf16-0.1-socket``."""
    socket = token.endswith("-socket")
    parts = token.removesuffix("-socket").split("-")
    if (
        len(parts) not in (3, 4)
        or parts[0] not in ("worker", "server")
        or not parts[1].isdigit()
        or int(parts[1]) < 1
        or parts[2] not in ("fp32", "bf16")
    ):
        raise SystemExit(
            f"--runs: {token!r} is not mode-gpus-precision[-cacheRatio][-socket], "
            "e.g. worker-2-bf16, server-4-fp32-0.2 or worker-4-bf16-0.1-socket"
        )
    ratio = float(parts[3]) if len(parts) == 4 else 1.0
    return RunConfig(parts[0], int(parts[1]), parts[2], ratio, socket)


def num_partitions(runs: list[RunConfig]) -> int:
    """Partitions that every run's holders (one per GPU) divide into equal blocks."""
    return math.lcm(*(r.gpus for r in runs)) if runs else 1


def job_spec(
    cfg: RunConfig, args: argparse.Namespace, cuda: bool, partitions: int
) -> DistGNNJobSpec:
    server = cfg.mode == "server"
    return parse_spec(
        {
            "dataset": {
                "synthetic": {
                    "numNodes": args.nodes,
                    "numEdges": products_edges(args),
                    "numFeatures": args.features,
                    "numClasses": args.classes,
                }
            },
            "partition": {"algorithm": "random", "numPartitions": partitions},
            "samplers": {
                "replicas": cfg.gpus if server else 0,
                "gpusPerPod": 1 if server and cuda else 0,
                "workers": args.sampler_workers,
                "concurrency": args.concurrency,
                "cacheRatio": cfg.cache_ratio,
                "replicateTopology": "always",
                **feature_memory(cfg, args),
            },
            "trainers": {
                "replicas": cfg.gpus,
                "gpusPerPod": 1 if cuda else 0,
                "prefetch": args.prefetch,
            },
            "model": model_section("sage", args),
            "training": run_training(cfg, args, evalEvery=args.eval_every),
        }
    )


def run_training(cfg: RunConfig, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """A run's ``training``: ``--epochs``, a checkpoint after the last, bf16 as the run says;
    ``extra``: further fields (``learning_rate`` too)."""
    return training_section(
        args,
        epochs=args.epochs,
        bf16=cfg.precision == "bf16",
        checkpointEvery=args.epochs,
        **extra,
    )


def feature_memory(cfg: RunConfig, args: argparse.Namespace) -> dict[str, Any]:
    """``samplers.featureMemory`` from ``--feature-memory``: a quantity, auto, or ``N%`` of
    one holder's table (its owned rows plus its cache, at the run's precision)."""
    value = getattr(args, "feature_memory", None)
    if not value:
        return {}
    if not str(value).endswith("%"):
        return {"featureMemory": value}
    share = float(str(value)[:-1]) / 100.0
    owned = math.ceil(args.nodes / cfg.gpus)
    held = owned + round(cfg.cache_ratio * (args.nodes - owned))
    row = args.features * (2 if cfg.precision == "bf16" else 4)
    return {"featureMemory": int(share * held * row)}


def role_sections(cfg: RunConfig, args: argparse.Namespace, cuda: bool) -> dict[str, Any]:
    """The samplers and trainers of a run: one trainer per GPU and, server-client, one sampler
    per GPU (on the GPU when ``cuda``) with ``--sampler-workers`` threads."""
    server = cfg.mode == "server"
    return {
        "samplers": {
            "replicas": cfg.gpus if server else 0,
            "gpusPerPod": 1 if server and cuda else 0,
            "workers": args.sampler_workers,
            "cacheRatio": cfg.cache_ratio,
            **feature_memory(cfg, args),
        },
        "trainers": {"replicas": cfg.gpus, "gpusPerPod": 1 if cuda else 0},
    }


def refusal(spec: DistGNNJobSpec) -> str | None:
    """Why ``distgnn run`` would refuse the job before starting it, or None."""
    try:
        check_supported(spec)
    except UnsupportedJobError as exc:
        return str(exc)
    return None


def layout(args: argparse.Namespace, run_dir: Path) -> LocalLayout:
    """The job's local layout: the shared volume under ``--work-dir``, every visible GPU."""
    cuda = args.device == "cuda"
    return LocalLayout(
        job_name=JOB_NAME,
        namespace="local",
        data_dir=args.work_dir / "data",
        run_dir=run_dir,
        gpus=visible_gpu_ids() if cuda else (),
    )


def visible_gpu_ids() -> tuple[str, ...]:
    """The ids the processes' CUDA_VISIBLE_DEVICES name: this process's own visible GPUs (so
    that two benchmarks can share a machine, each on its own GPUs)."""
    count = torch.cuda.device_count()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    ids = [x.strip() for x in cvd.split(",")] if cvd else [str(i) for i in range(count)]
    return tuple(ids[:count])


def partition_plan(spec: DistGNNJobSpec, args: argparse.Namespace, run_dir: Path) -> JobPlan:
    """The job's partition step as ``distgnn run`` starts it (it generates the graph)."""
    rendered = render_job(JOB_NAME, uuid.uuid4().hex, spec, partition_reused=False)
    return plan_job(layout(args, run_dir), rendered, threads=None)


def workload_plan(
    spec: DistGNNJobSpec,
    args: argparse.Namespace,
    root: Path,
    *,
    rpc_cuda: bool = False,
    profile: bool,
    env: dict[str, str] | None = None,
) -> JobPlan:
    """The job's trainers (and samplers), as ``distgnn run`` starts them on a store already
    on disk; ``profile`` writes trainer 0's profile under ``root``; ``env`` adds to
    ``--env``."""
    cuda = args.device == "cuda"
    rendered = render_job(JOB_NAME, uuid.uuid4().hex, spec, partition_reused=True)
    extra = {ENV_RPC_CUDA: "1" if rpc_cuda else "0", **args.env, **(env or {})}
    if profile:
        extra[ENV_PROFILE_DIR] = str(root / "profile")
    job = plan_job(layout(args, root), rendered, threads=None if cuda else 1)
    workload = [s.with_contract(rendezvous_timeout_s=120.0, extra=extra) for s in job.workload]
    return JobPlan(planner=job.planner, partition=(), workload=workload)


def plan(
    cfg: RunConfig,
    args: argparse.Namespace,
    partitions: int,
    root: Path,
    *,
    rpc_cuda: bool,
    profile: bool,
) -> JobPlan:
    """The run's processes, as ``distgnn run`` would start them (the partition is on disk)."""
    spec = job_spec(cfg, args, args.device == "cuda", partitions)
    return workload_plan(spec, args, root, rpc_cuda=rpc_cuda, profile=profile, env=cfg.env)
