"""The idle-GPU summary of a profiler trace (benchmarks/gpu_distributed/trace_gaps.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.support.scripts import load_script

trace_gaps = load_script(
    Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_distributed" / "trace_gaps.py",
    "trace_gaps",
)


def _event(cat: str, name: str, ts: float, dur: float, tid: int = 1) -> dict[str, object]:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": tid}


def test_idle_time_is_the_span_less_the_union_and_goes_to_the_host_ops_meanwhile(
    tmp_path: Path,
) -> None:
    events = [
        _event("kernel", "a", 0, 100, tid=7),
        _event("kernel", "b", 50, 100, tid=8),  # overlaps a on another stream: busy 0..150
        _event("gpu_memcpy", "Memcpy DtoH", 400, 100, tid=7),  # gap 150..400
        _event("kernel", "a", 510, 90, tid=7),  # gap 500..510: under --min-gap-us
        _event("cuda_runtime", "cudaStreamSynchronize", 120, 300),  # 250 us of the gap
        _event("cpu_op", "gloo:all_to_all", 300, 50),
        {"ph": "i", "name": "marker", "ts": 0},  # not a complete event: ignored
    ]
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    found = trace_gaps.summarise(trace_gaps.load(path), steps=2, min_gap_us=20, top=5)
    assert found["span_ms"] == 0.6
    assert found["busy_ms"] == pytest.approx(0.34)
    assert found["idle_ms"] == pytest.approx(0.26)
    assert found["gaps"] == {"min_us": 20, "count": 1, "ms": 0.25, "ms_per_step": 0.125}
    assert found["idle_by_host_op"] == [
        ["cuda_runtime: cudaStreamSynchronize", 0.125],
        ["cpu_op: gloo:all_to_all", 0.025],
    ]
    assert found["kernels"][0] == ["a", 0.095]
    assert found["idle_ms_per_step"] == pytest.approx(0.13)
    # per host thread, by name, per step: the sync and the all-to-all ran on thread 1
    assert found["threads"]["1"] == [
        ["cuda_runtime: cudaStreamSynchronize", 0.15],
        ["cpu_op: gloo:all_to_all", 0.025],
    ]
    assert "7" not in found["threads"]  # GPU streams are not host threads


def test_a_trace_without_gpu_activity_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps([_event("cpu_op", "aten::add", 0, 10)]))
    with pytest.raises(SystemExit, match="no GPU activity"):
        trace_gaps.summarise(trace_gaps.load(path), steps=None, min_gap_us=20, top=5)
