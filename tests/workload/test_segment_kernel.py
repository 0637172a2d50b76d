"""The Triton segment kernel equals ``embedding_bag`` (values and gradients): under
Triton's interpreter on the CPU, and on the GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

CHECK = Path(__file__).with_name("segment_kernel_check.py")


def test_kernel_matches_embedding_bag_under_the_interpreter() -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("DISTGNN_SEGMENT_KERNEL", None)
    done = subprocess.run(
        [sys.executable, "-P", str(CHECK), "cpu"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "matches" in done.stdout


def test_cpu_tensors_use_embedding_bag_without_the_interpreter() -> None:
    from distgnn_workload.models import segment_kernel

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter runs the kernel on the CPU")
    assert not segment_kernel.available(torch.empty(1))


def test_an_unknown_kernel_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from distgnn_workload.models import segment_kernel

    monkeypatch.setenv(segment_kernel.KERNEL_ENV, "cusparse")
    with pytest.raises(ValueError, match="triton or torch"):
        segment_kernel.available(torch.empty(1))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_kernel_matches_embedding_bag_on_the_gpu() -> None:
    sys.path.insert(0, str(CHECK.parent))
    from segment_kernel_check import check

    check("cuda")
