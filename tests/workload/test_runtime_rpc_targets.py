"""The registry of RPC targets: typed keys, a bounded wait, fast failure once sealed."""

from __future__ import annotations

import threading

import pytest

from distgnn_workload.runtime.rpc_targets import Target, TargetMissingError, TargetRegistry

TABLE = Target[dict[str, int]]("feature table")
SERVER = Target[str]("sampler server")


def test_a_registered_target_is_found_and_replaced() -> None:
    registry = TargetRegistry()
    assert registry.find(TABLE) is None
    registry.register(TABLE, {"rows": 3})
    assert registry.get(TABLE) == {"rows": 3}
    registry.register(TABLE, {"rows": 4})
    assert registry.get(TABLE) == {"rows": 4}


def test_a_request_waits_for_a_target_registered_later() -> None:
    registry = TargetRegistry(wait_s=60)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(registry.get(SERVER)))
    reader.start()
    registry.register(SERVER, "ready")
    reader.join(timeout=30)
    assert got == ["ready"]


def test_a_missing_target_fails_at_once_once_sealed_naming_it() -> None:
    registry = TargetRegistry(wait_s=600)
    registry.register(TABLE, {})
    registry.seal()
    with pytest.raises(TargetMissingError) as info:
        registry.get(SERVER)  # no 600 s wait: the process serves no sampler
    message = str(info.value)
    assert "sampler server" in message
    assert "registered everything it serves" in message
    assert "registered: feature table" in message


def test_an_unsealed_miss_fails_after_the_wait_bound() -> None:
    registry = TargetRegistry()
    registry.configure(wait_s=0.05)
    with pytest.raises(TargetMissingError, match=r"sampler server.*not registered within 0\.05s"):
        registry.get(SERVER)
    with pytest.raises(ValueError, match="wait_s"):
        registry.configure(wait_s=0)


def test_sealing_wakes_a_waiting_request() -> None:
    registry = TargetRegistry(wait_s=600)
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            registry.get(SERVER)
        except TargetMissingError as err:
            errors.append(err)

    reader = threading.Thread(target=ask)
    reader.start()
    registry.seal()
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert len(errors) == 1
