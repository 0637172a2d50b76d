"""A benchmark run (``mode-gpus-precision[-cacheRatio]``), its job spec and its processes,
planned as ``distgnn run`` plans them.
"""

from __future__ import annotations

import argparse
import math
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from synthetic_gpu import PRODUCTS_NODES, PRODUCTS_UNDIRECTED_EDGES

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_operator.local.job_plan import JobPlan, plan_job, render_job
from distgnn_operator.local.launch_plan import LocalLayout

JOB_NAME = "bench"


ENV_RPC_CUDA = "DISTGNN_RPC_CUDA"


ENV_PROFILE_DIR = "DISTGNN_PROFILE_DIR"


@dataclass(frozen=True)
class RunConfig:
    mode: str
    gpus: int
    precision: str
    cache_ratio: float

    @property
    def name(self) -> str:
        return f"{self.mode}-{self.gpus}-{self.precision}"

    @property
    def full_name(self) -> str:
        return f"{self.name}-{self.cache_ratio:g}"


def parse_run(token: str) -> RunConfig:
    """``mode-gpus-precision[-cacheRatio]``, e.g. ``worker-2-bf16-0.2``."""
    parts = token.split("-")
    if (
        len(parts) not in (3, 4)
        or parts[0] not in ("worker", "server")
        or not parts[1].isdigit()
        or int(parts[1]) < 1
        or parts[2] not in ("fp32", "bf16")
    ):
        raise SystemExit(
            f"--runs: {token!r} is not mode-gpus-precision[-cacheRatio], "
            "e.g. worker-2-bf16 or server-4-fp32-0.2"
        )
    ratio = float(parts[3]) if len(parts) == 4 else 1.0
    return RunConfig(parts[0], int(parts[1]), parts[2], ratio)


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
                    "numEdges": args.edges
                    or round(args.nodes * PRODUCTS_UNDIRECTED_EDGES / PRODUCTS_NODES),
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
            },
            "trainers": {
                "replicas": cfg.gpus,
                "gpusPerPod": 1 if cuda else 0,
                "prefetch": args.prefetch,
            },
            "model": {
                "arch": "sage",
                "hiddenChannels": args.hidden,
                "numLayers": len(args.fanout),
                "fanout": args.fanout,
                "dropout": 0.5,
            },
            "training": {
                "epochs": args.epochs,
                "batchSize": args.batch_size,
                "learningRate": 0.003,
                "evalEvery": args.eval_every,
                "checkpointEvery": args.epochs,
                "bf16": cfg.precision == "bf16",
            },
        }
    )


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
    cuda = args.device == "cuda"
    spec = job_spec(cfg, args, cuda, partitions)
    uid = uuid.uuid4().hex
    layout = LocalLayout(
        job_name=JOB_NAME,
        namespace="local",
        data_dir=args.work_dir / "data",
        run_dir=root,
        gpus=tuple(str(i) for i in range(torch.cuda.device_count())) if cuda else (),
    )
    rendered = render_job(JOB_NAME, uid, spec, partition_reused=True)
    extra = {ENV_RPC_CUDA: "1" if rpc_cuda else "0", **args.env}
    if profile:
        extra[ENV_PROFILE_DIR] = str(root / "profile")
    job = plan_job(layout, rendered, threads=None if cuda else 1)
    workload = [s.with_contract(rendezvous_timeout_s=120.0, extra=extra) for s in job.workload]
    return JobPlan(planner=job.planner, partition=(), workload=workload)
