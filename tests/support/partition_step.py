"""The partition step as a real process, on a partition Job's own environment with local paths.

Operator tests run it where the kubelet (kwok) would run the pod: the Job's env vars and the
config the operator wrote, with the volume, the config file and the termination log mapped to
a temporary folder. The store it writes and the figures it leaves come back for checking.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distgnn_api import contract
from distgnn_api.contract import CONFIG_FILE_NAME, JobConfig, PartitionFigures, Role


def run_partition_step(
    job_env: Mapping[str, Any], config_json: str, tmp: Path
) -> tuple[Path, PartitionFigures]:
    """Run the partition role on ``job_env`` (the Job container's env) and ``config_json``
    (the ConfigMap's job config): the store's folder and the figures of its termination log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTGNN_")}
    env.update({k: v for k, v in job_env.items() if isinstance(v, str)})
    job = JobConfig.model_validate_json(config_json)
    data, log = tmp / "data", tmp / "termination-log"
    (tmp / CONFIG_FILE_NAME).write_text(config_json)
    env.update(
        {
            contract.ENV_DATA_DIR: str(data),
            contract.ENV_PARTITION_DIR: str(contract.partition_dir(data, job.partition_key)),
            contract.ENV_RUN_DIR: str(contract.run_dir(data, job.uid)),
            contract.ENV_CONFIG: str(tmp / CONFIG_FILE_NAME),
            contract.ENV_TERMINATION_LOG: str(log),
            contract.ENV_METRICS_PORT: "0",
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", contract.role_module(Role.partitioner)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return contract.partition_dir(data, job.partition_key), PartitionFigures.model_validate_json(
        log.read_text()
    )
