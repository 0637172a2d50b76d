"""A heterogeneous benchmark run: its job spec (``syntheticMag``, R-SAGE) and its processes,
planned as ``distgnn run`` plans them.

Runs are named as in ``benchmarks/gpu_distributed`` (``mode-gpus-precision``, parsed by its
``run_config.parse_run``). One partition per GPU: a heterogeneous job has one partition per
holder (trainers in worker mode, samplers in server-client mode). A run that ``distgnn run``
would refuse (``check_supported``) is reported as skipped with the refusal's text.
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import torch
from run_config import ENV_PROFILE_DIR, ENV_RPC_CUDA, JOB_NAME, RunConfig

from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_operator.local.job_plan import (
    JobPlan,
    UnsupportedJobError,
    check_supported,
    plan_job,
    render_job,
)
from distgnn_operator.local.launch_plan import LocalLayout

TARGET = "paper"


def job_spec(
    cfg: RunConfig, args: argparse.Namespace, cuda: bool, partitions: int
) -> DistGNNJobSpec:
    """The run's ``DistGNNJob`` spec: the MAG-shaped graph, random partitions, R-SAGE."""
    server = cfg.mode == "server"
    return parse_spec(
        {
            "dataset": {
                "syntheticMag": {"scale": args.scale, "seed": args.graph_seed},
                "hetero": {"targetNodeType": TARGET, "addReverseEdges": True},
            },
            "partition": {"algorithm": "random", "numPartitions": partitions},
            "samplers": {
                "replicas": cfg.gpus if server else 0,
                "gpusPerPod": 1 if server and cuda else 0,
                "workers": args.sampler_workers,
                "cacheRatio": cfg.cache_ratio,
            },
            "trainers": {"replicas": cfg.gpus, "gpusPerPod": 1 if cuda else 0},
            "model": {
                "arch": "rsage",
                "hiddenChannels": args.hidden,
                "numLayers": len(args.fanout),
                "fanout": args.fanout,
                "embeddingDim": args.embedding_dim,
                "dropout": 0.5,
            },
            "training": {
                "epochs": args.epochs,
                "batchSize": args.batch_size,
                "learningRate": 0.003,
                "evalEvery": args.eval_every,
                "checkpointEvery": args.epochs,
                "bf16": cfg.precision == "bf16",
                # sampled at the training fanout, as the PyG baseline beside it evaluates
                "evaluation": {"test": "sampled", "validation": "sampled"},
            },
        }
    )


def refusal(spec: DistGNNJobSpec) -> str | None:
    """Why ``distgnn run`` would refuse the job before starting it, or None."""
    try:
        check_supported(spec)
    except UnsupportedJobError as exc:
        return str(exc)
    return None


def layout(args: argparse.Namespace, run_dir: Path) -> LocalLayout:
    cuda = args.device == "cuda"
    return LocalLayout(
        job_name=JOB_NAME,
        namespace="local",
        data_dir=args.work_dir / "data",
        run_dir=run_dir,
        gpus=tuple(str(i) for i in range(torch.cuda.device_count())) if cuda else (),
    )


def partition_plan(spec: DistGNNJobSpec, args: argparse.Namespace, run_dir: Path) -> JobPlan:
    """The job's partition step as ``distgnn run`` starts it (it generates the graph)."""
    rendered = render_job(JOB_NAME, uuid.uuid4().hex, spec, partition_reused=False)
    return plan_job(layout(args, run_dir), rendered, threads=None)


def plan(
    cfg: RunConfig,
    args: argparse.Namespace,
    partitions: int,
    root: Path,
    *,
    profile: bool,
) -> JobPlan:
    """The run's trainers (and samplers), as ``distgnn run`` starts them on a reused store."""
    cuda = args.device == "cuda"
    spec = job_spec(cfg, args, cuda, partitions)
    rendered = render_job(JOB_NAME, uuid.uuid4().hex, spec, partition_reused=True)
    extra = {ENV_RPC_CUDA: "0", **args.env}
    if profile:
        extra[ENV_PROFILE_DIR] = str(root / "profile")
    job = plan_job(layout(args, root), rendered, threads=None if cuda else 1)
    workload = [s.with_contract(rendezvous_timeout_s=120.0, extra=extra) for s in job.workload]
    return JobPlan(planner=job.planner, partition=(), workload=workload)
