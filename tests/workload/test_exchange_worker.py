"""The exchange's ordered thread: calls run one at a time in the order submitted, errors
reach whoever waits, and after one failure the later calls fail at once."""

from __future__ import annotations

import functools
import threading
import time

import pytest
import torch

from distgnn_workload.runtime.features.exchange_worker import OrderedWorker


def test_calls_run_in_submission_order_on_one_thread() -> None:
    worker = OrderedWorker("test-worker", torch.device("cpu"))
    seen: list[tuple[int, str]] = []

    def task(i: int) -> int:
        time.sleep(0.002 * (5 - i))  # the earlier calls take longer: order must still hold
        seen.append((i, threading.current_thread().name))
        return i * i

    futures = [worker.submit(functools.partial(task, i)) for i in range(5)]
    assert [f.result(timeout=10) for f in futures] == [0, 1, 4, 9, 16]
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert {name for _, name in seen} == {"test-worker"}
    assert worker.call(lambda: "last") == "last"
    worker.stop()
    with pytest.raises(RuntimeError, match="has stopped"):
        worker.submit(lambda: None)


def test_a_failure_reaches_its_waiter_and_fails_every_later_call() -> None:
    worker = OrderedWorker("test-worker", torch.device("cpu"))

    def broken() -> None:
        raise ValueError("peer lost")

    first = worker.submit(broken)
    later = worker.submit(lambda: 1)
    with pytest.raises(ValueError, match="peer lost"):
        first.result(timeout=10)
    with pytest.raises(RuntimeError, match="an earlier call failed: peer lost"):
        later.result(timeout=10)
    worker.stop()
