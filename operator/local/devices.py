"""The local accelerators that ``distgnn run`` hands out to trainer and sampler processes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from distgnn_api.contract import WORKLOAD_PACKAGE

_NVIDIA_DRIVER_PATHS = ("/dev/nvidiactl", "/proc/driver/nvidia/gpus")
# Asked in a child so that the CLI itself never imports torch (the operator image has none).
_COUNT_GPUS = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"


class WorkloadMissingError(RuntimeError):
    """The workload packages (torch, the distgnn workload) are not installed here."""


def visible_gpus(requested: int | None = None) -> list[str]:
    """Ids (for CUDA_VISIBLE_DEVICES) of the GPUs local processes may use.

    ``requested`` caps the count (0 forces CPU); CUDA_VISIBLE_DEVICES, when set, is honoured.
    """
    missing = [m for m in ("torch", WORKLOAD_PACKAGE) if importlib.util.find_spec(m) is None]
    if missing:
        raise WorkloadMissingError(
            f"distgnn run needs the workload next to the CLI ({', '.join(missing)} not found): "
            "pip install 'distgnn[all]'"
        )
    if requested == 0:
        return []
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1"):
        return []
    if not any(Path(p).exists() for p in _NVIDIA_DRIVER_PATHS):
        return []  # no NVIDIA driver: no need to ask torch (which takes seconds to import)
    proc = subprocess.run(
        [sys.executable, "-c", _COUNT_GPUS], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise WorkloadMissingError(
            "distgnn run needs the workload (torch) installed next to the CLI: "
            "pip install 'distgnn[all]'\n" + proc.stderr.strip()[-2000:]
        )
    count = int(proc.stdout.strip() or 0)
    ids = [x.strip() for x in cvd.split(",")] if cvd else [str(i) for i in range(count)]
    ids = ids[:count]
    return ids if requested is None else ids[:requested]
