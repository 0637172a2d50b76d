"""Layer-wise inference on GPUs: NCCL exchange, host-resident layers and bf16 autocast."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distgnn_workload.evaluation import LayerwiseInference
from tests.support.layerwise import ARCHS, full_graph_logits, model_of, write_store
from tests.support.layerwise_peers import check_two_ranks

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("arch", ARCHS)
def test_one_gpu_equals_the_cpu_full_graph_forward(tmp_path: Path, arch: str) -> None:
    store = write_store(tmp_path / "store", 2)
    model = model_of(arch)
    want = full_graph_logits(model, store)
    cuda = torch.device("cuda")
    model = model.to(cuda)
    for on_host in (False, True):
        engine = LayerwiseInference.of_store(store, device=cuda, chunk_edges=97, on_host=on_host)
        got = engine.logits(model).cpu()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    got = LayerwiseInference.of_store(store, device=cuda, bf16=True).logits(model).cpu()
    assert float((got - want).norm() / want.norm()) < 3e-2


def _two_gpus() -> bool:
    return torch.cuda.device_count() >= 2


@pytest.mark.skipif(not _two_gpus(), reason="needs 2 GPUs")
@pytest.mark.parametrize(("on_host", "bf16"), [(False, False), (True, False), (False, True)])
def test_two_gpus_equal_the_cpu_full_graph_forward(
    tmp_path: Path, on_host: bool, bf16: bool
) -> None:
    differences = check_two_ranks(tmp_path, cuda=True, on_host=on_host, bf16=bf16)
    print("largest absolute logit difference:", differences)
