"""A heterogeneous benchmark run's job spec (``syntheticMag``, R-SAGE); its processes are
planned by ``run_config`` of ``benchmarks/gpu_distributed``, as ``distgnn run`` plans them.

Runs are named as in ``benchmarks/gpu_distributed`` (``mode-gpus-precision``, parsed by its
``run_config.parse_run``). One partition per GPU: a heterogeneous job has one partition per
holder (trainers in worker mode, samplers in server-client mode). A run that ``distgnn run``
would refuse (``check_supported``) is reported as skipped with the refusal's text.
"""

from __future__ import annotations

import argparse

from run_config import RunConfig, role_sections, run_training
from spec_sections import model_section

from distgnn_api.spec import DistGNNJobSpec, parse_spec

TARGET = "paper"


def job_spec(
    cfg: RunConfig, args: argparse.Namespace, cuda: bool, partitions: int
) -> DistGNNJobSpec:
    """The run's ``DistGNNJob`` spec: the MAG-shaped graph, random partitions, R-SAGE, and
    ``--embedding-memory`` as ``trainers.embeddingMemory`` where given."""
    roles = role_sections(cfg, args, cuda)
    budget = getattr(args, "embedding_memory", None)
    if budget:
        roles["trainers"]["embeddingMemory"] = budget
    return parse_spec(
        {
            "dataset": {
                "syntheticMag": {"scale": args.scale, "seed": args.graph_seed},
                "hetero": {"targetNodeType": TARGET, "addReverseEdges": True},
            },
            "partition": {"algorithm": "random", "numPartitions": partitions},
            **roles,
            "model": model_section("rsage", args, embeddingDim=args.embedding_dim),
            "training": run_training(
                cfg,
                args,
                evalEvery=args.eval_every,
                # sampled at the training fanout, as the PyG baseline beside it evaluates
                evaluation={"test": "sampled", "validation": "sampled"},
            ),
        }
    )
