"""On GPUs (device machine only): NCCL DDP across two GPUs, CUDA tensors over RPC.

Two trainer pods (one GPU each) and, in server-client mode, two sampler pods on the same
GPUs, as local processes; bf16 autocast with bf16 features. The job must reach the same
accuracy as on CPU and leave its result, with the samplers' mini-batches through CUDA IPC shared slots of the
sampler on the trainer's own GPU (locality), every
sampler's CUDA graph captured (no fallback, also with several sampling threads per server)
and the training step replayed from a CUDA graph.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from distgnn_api import contract as c
from distgnn_workload.data.synthetic import generate
from distgnn_workload.runtime.cuda_memory import LOG_PREFIX, OVERALL, STATS_KEY, TRAINER_PHASES
from tests.e2e.test_workload_training import finish, job_spec, result_of
from tests.e2e.workload_launcher import LocalWorkload

pytestmark = [pytest.mark.e2e, pytest.mark.gpu, pytest.mark.timeout(300)]


@pytest.mark.parametrize(("samplers", "cache_ratio"), [(2, 0.2), (0, 0.2), (0, 1.0)])
def test_two_gpus_train_with_nccl(tmp_path: Path, samplers: int, cache_ratio: float) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    spec = job_spec(
        **{
            "dataset.synthetic.numNodes": 20000,
            "dataset.synthetic.numEdges": 200000,
            "samplers.replicas": samplers,
            "samplers.gpusPerPod": 1 if samplers else 0,
            "samplers.cacheRatio": cache_ratio,
            "samplers.concurrency": 4,
            "trainers.gpusPerPod": 1,
            "training.bf16": True,
            "training.batchSize": 256,
            "partition.algorithm": "random",
        }
    )
    job = LocalWorkload(tmp_path, spec, device="cuda", env={"NCCL_NVLS_ENABLE": "0"})
    assert spec.dataset.synthetic is not None
    job.write_partitions(generate(spec.dataset.synthetic))
    job.start_all()
    finish(job)
    result = result_of(job)
    assert result.epochs == spec.training.epochs
    assert result.test_accuracy is not None
    assert result.test_accuracy >= 0.85, job.logs()
    log = job.stdout_of(c.Role.trainer, 0)
    assert "(nccl)" in log
    assert "training step captured in a CUDA graph" in log, log
    if samplers:
        # locality: each trainer draws from the sampler on its own GPU, and maps only its slots
        assert "drawing mini-batches from sampler-0" in log, log
        assert "mapped 5 shared slots of sampler-0" in log, log
        assert "shared slots of sampler-1" not in log, log
    elif cache_ratio < 1:
        # the peer's rows come over the trainers' feature exchange (NCCL), not RPC
        assert "remote feature rows: over the feature exchange" in log, log
        assert "shared slots of trainer" not in log, log
    else:
        assert "remote feature rows: none (all cached)" in log, log
    logs = "\n".join(path.read_text(errors="replace") for path in job.log_dir.glob("*.log"))
    assert "falling back to the dynamic execution" not in logs, job.logs()
    assert "Offset increment" not in logs, job.logs()
    assert "failed" not in log, log
    # each trainer's GPU memory by phase in the stats file, each GPU sampler's in its log
    stats = json.loads((job.run_dir / "training_stats.json").read_text())
    assert sorted(stats[STATS_KEY]) == ["0", "1"]
    for phases in stats[STATS_KEY].values():
        assert list(phases) == [*TRAINER_PHASES, OVERALL], phases
        assert all(0 < p["allocated_peak"] <= p["reserved_peak"] for p in phases.values())
    for rank in range(samplers):
        assert job.stdout_of(c.Role.sampler, rank).count(LOG_PREFIX) == 2
