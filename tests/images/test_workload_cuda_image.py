"""The CUDA workload image: built, and torch (a CUDA build), PyG and the workload import from
its root filesystem (read-only, uid 10001, shells masked). It is not run on a GPU here."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.images.hygiene import IMPORTS, assert_hygiene, run_in
from tests.support.image_run import ImageRoot

pytestmark = [pytest.mark.images, pytest.mark.timeout(3600)]


def test_workload_cuda_image_imports_torch_with_cuda(
    unpacked: Callable[[str], ImageRoot],
) -> None:
    cuda_root = unpacked("workload-cuda")
    assert_hygiene(cuda_root)
    version, cuda, has_cuda = run_in(cuda_root, ["python", "-c", IMPORTS]).split()
    assert has_cuda == "True"
    assert cuda != "None", f"torch {version} in the CUDA image is not a CUDA build"
    run_in(cuda_root, ["python", "-c", "import torch, torch_geometric, distgnn_workload"])
