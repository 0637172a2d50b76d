"""GPU memory records by phase: nothing off CUDA, the overall peaks and the trainers' gather
from the records, the allocator's counters on a GPU."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from distgnn_workload.runtime import cuda_memory
from distgnn_workload.runtime.cuda_memory import CudaMemory, CudaMemoryPhases
from distgnn_workload.runtime.ddp import single_process

GIB = 2**30


def record(allocated_peak: int, reserved_peak: int, card_free: int, retries: int) -> CudaMemory:
    return CudaMemory(
        allocated=allocated_peak // 2,
        allocated_peak=allocated_peak,
        reserved=reserved_peak // 2,
        reserved_peak=reserved_peak,
        active_peak=allocated_peak + 1,
        alloc_retries=retries,
        card_free=card_free,
        card_total=80 * GIB,
    )


def test_nothing_is_recorded_off_cuda(caplog: pytest.LogCaptureFixture) -> None:
    cpu = torch.device("cpu")
    assert cuda_memory.snapshot(cpu) is None
    phases = CudaMemoryPhases(cpu)
    assert phases.mark("setup") is None
    assert phases.records == {}
    assert phases.as_dict() is None
    assert cuda_memory.gather(phases, single_process()) is None
    with caplog.at_level(logging.INFO):
        cuda_memory.log_record(logging.getLogger("test"), phases, "setup")
    assert cuda_memory.LOG_PREFIX not in caplog.text


def test_overall_takes_the_largest_phase_peaks_and_the_last_counters() -> None:
    setup = record(3 * GIB, 4 * GIB, 70 * GIB, 0)
    training = record(5 * GIB, 9 * GIB, 62 * GIB, 2)
    evaluation = record(4 * GIB, 7 * GIB, 64 * GIB, 3)
    got = cuda_memory.overall([setup, training, evaluation])
    assert got["allocated_peak"] == 5 * GIB
    assert got["reserved_peak"] == 9 * GIB
    assert got["active_peak"] == 5 * GIB + 1
    assert got["card_free"] == 62 * GIB
    assert got["alloc_retries"] == 3
    assert got["reserved"] == evaluation.reserved


def test_gather_keeps_the_phases_recorded_by_rank() -> None:
    # the records of a CUDA process, set as mark() would have (no GPU here): the packing
    # into one tensor and back is what is checked
    phases = CudaMemoryPhases(torch.device("cuda"))
    phases.records["setup"] = record(3 * GIB, 4 * GIB, 70 * GIB, 0)
    phases.records["training"] = record(5 * GIB, 9 * GIB, 62 * GIB, 1)
    got = cuda_memory.gather(phases, single_process())
    assert got is not None
    assert list(got) == ["0"]
    assert list(got["0"]) == ["setup", "training", cuda_memory.OVERALL]
    assert got["0"]["setup"]["reserved_peak"] == 4 * GIB
    assert got["0"]["training"]["alloc_retries"] == 1
    assert got["0"][cuda_memory.OVERALL]["reserved_peak"] == 9 * GIB
    assert got["0"] == phases.as_dict()


@pytest.mark.gpu
def test_each_phase_has_its_own_peak_on_a_gpu(caplog: pytest.LogCaptureFixture) -> None:
    device = torch.device("cuda")
    phases = CudaMemoryPhases(device)
    base = torch.cuda.memory_allocated(device)  # what earlier tests in this process left
    big = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
    del big
    first = phases.mark("big")
    small = torch.empty(16 * 2**20, dtype=torch.uint8, device=device)
    with caplog.at_level(logging.INFO):
        cuda_memory.log_record(logging.getLogger("test"), phases, "small")
    del small
    second = phases.records["small"]
    assert first is not None
    assert second.allocated_peak - base < 256 * 2**20 <= first.allocated_peak - base
    assert first.reserved_peak >= first.allocated_peak
    assert 0 < second.card_free < second.card_total
    line = next(x for x in caplog.messages if x.startswith(cuda_memory.LOG_PREFIX))
    assert json.loads(line.removeprefix(cuda_memory.LOG_PREFIX))["phase"] == "small"
    whole = phases.as_dict()
    assert whole is not None
    assert whole[cuda_memory.OVERALL]["allocated_peak"] == first.allocated_peak
