"""torch.profiler over a few training steps of rank 0, when ``DISTGNN_PROFILE_DIR`` is set."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import torch

from distgnn_api.contract import ENV_PROFILE_DIR as ENV_PROFILE_DIR
from distgnn_api.contract import WorkloadEnv

PROFILE_STEPS = (20, 40)
"""Steps [a, b) of the first epoch that a profiling rank 0 records."""


class StepProfiler:
    """torch.profiler over a few training steps; writes a table to ``DISTGNN_PROFILE_DIR``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.profile: torch.profiler.profile | None = None

    @classmethod
    def create(cls, rank: int, first_epoch: bool) -> StepProfiler | None:
        folder = WorkloadEnv.setting(ENV_PROFILE_DIR)
        return cls(Path(folder)) if folder and rank == 0 and first_epoch else None

    def step(self, step: int) -> None:
        first, last = PROFILE_STEPS
        if step == first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profile = torch.profiler.profile(activities=activities)
            self.profile.__enter__()  # type: ignore[no-untyped-call]
        elif step == last:
            self.close()

    def close(self) -> None:
        if self.profile is None:
            return
        prof, self.profile = self.profile, None
        prof.__exit__(None, None, None)  # type: ignore[no-untyped-call]
        self.folder.mkdir(parents=True, exist_ok=True)
        averages = prof.key_averages()
        cuda = torch.cuda.is_available()
        steps = PROFILE_STEPS[1] - PROFILE_STEPS[0]
        text = f"steps {PROFILE_STEPS[0]}..{PROFILE_STEPS[1]} ({steps} steps)\n"
        if cuda:
            text += "by self CUDA time\n"
            text += averages.table(sort_by="self_cuda_time_total", row_limit=30)
        text += "\nby self CPU time\n"
        text += averages.table(sort_by="self_cpu_time_total", row_limit=30)
        (self.folder / "profile-trainer-0.txt").write_text(text)
        trace = self.folder / "trace-trainer-0.json"
        prof.export_chrome_trace(str(trace))
        with trace.open("rb") as src, gzip.open(f"{trace}.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        trace.unlink()
