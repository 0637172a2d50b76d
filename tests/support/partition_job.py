"""A partition step's job under a temporary folder: its spec, the job config on the volume, the
contract env, and ``python -m distgnn_workload.partitioner`` run on them as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from distgnn_api import contract as c
from distgnn_api.spec import parse_spec


class Job:
    """A job config and the contract env of its partition step, under ``tmp``.

    The spec has the dataset, the partition and two sampler holders; ``spec`` adds sections
    (a model, a task and its linkPrediction, training).
    """

    def __init__(
        self, tmp: Path, dataset: dict[str, Any], partition: dict[str, Any], **spec: Any
    ) -> None:
        self.spec = parse_spec(
            {"dataset": dataset, "partition": partition, "samplers": {"replicas": 2}, **spec}
        )
        self.key = c.partition_key(self.spec)
        self.data = tmp / "data"
        self.data.mkdir(exist_ok=True)
        self.out = c.partition_dir(self.data, self.key)
        self.config = tmp / "job.json"
        self.config.write_text(c.job_config_json("demo", "default", "uid-1", self.spec))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
        env.update(
            {
                c.ENV_ROLE: c.Role.partitioner.value,
                c.ENV_DATA_DIR: str(self.data),
                c.ENV_PARTITION_DIR: str(self.out),
                c.ENV_RUN_DIR: str(c.run_dir(self.data, "uid-1")),
                c.ENV_CONFIG: str(self.config),
                c.ENV_JOB_NAME: "demo",
                c.ENV_JOB_UID: "uid-1",
                c.ENV_METRICS_PORT: "0",
            }
        )
        return env

    def run(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", c.role_module(c.Role.partitioner)],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def markers(self) -> list[Path]:
        return list((self.data / c.PARTITIONS_DIR).rglob(c.SUCCESS_MARKER))
