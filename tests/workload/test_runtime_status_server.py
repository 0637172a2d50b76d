"""The pod's HTTP server: Prometheus /metrics and the trainer's /progress on one port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from distgnn_api.contract import (
    ENV_JOB_NAME,
    ENV_JOB_UID,
    ENV_METRICS_ADDRESS,
    ENV_METRICS_PORT,
    ENV_PARTITION_DIR,
    ENV_ROLE,
    ENV_RUN_DIR,
    PROGRESS_PATH,
    Role,
)
from distgnn_api.spec import Progress
from distgnn_workload import metrics
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.status_server import (
    ProgressTracker,
    StatusServer,
    progress_from_file,
)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def tracker() -> ProgressTracker:
    return ProgressTracker(epochs=5)


@pytest.fixture
def server(tracker: ProgressTracker) -> Iterator[StatusServer]:
    srv = StatusServer(0, progress=tracker, host="127.0.0.1").start()
    yield srv
    srv.stop()


def test_metrics_serve_the_named_trainer_series(server: StatusServer) -> None:
    metrics.TRAINER_SEEDS.labels("7").inc(1024)
    metrics.TRAINER_DATA_WAIT_SECONDS.labels("7").observe(0.002)
    code, body = _get(server.port, "/metrics")
    assert code == 200
    assert 'distgnn_trainer_seeds_total{rank="7"} 1024.0' in body
    assert 'distgnn_trainer_data_wait_seconds_count{rank="7"} 1.0' in body


def test_progress_is_the_progress_model_in_json(
    server: StatusServer, tracker: ProgressTracker
) -> None:
    tracker.update(epoch=2, seeds_per_second=1234.5, loss=0.5, val_accuracy=0.9)
    code, body = _get(server.port, PROGRESS_PATH)
    assert code == 200
    progress = Progress.model_validate_json(body)
    assert progress.epoch == 2
    assert progress.epochs == 5
    assert progress.seeds_per_second == 1234.5
    assert progress.val_accuracy == 0.9
    assert progress.last_update_time is not None
    assert json.loads(body)["seedsPerSecond"] == 1234.5


def test_a_server_without_progress_answers_404_there() -> None:
    srv = StatusServer(0, host="127.0.0.1").start()
    try:
        assert _get(srv.port, PROGRESS_PATH)[0] == 404
        assert _get(srv.port, "/healthz") == (200, "ok\n")
        assert _get(srv.port, "/metrics")[0] == 200
    finally:
        srv.stop()


def test_a_busy_port_names_the_variable(server: StatusServer) -> None:
    with pytest.raises(OSError, match="DISTGNN_METRICS_PORT"):
        StatusServer(server.port, host="127.0.0.1")


def test_progress_mirror_file_round_trips(tmp_path: Path) -> None:
    mirror = tmp_path / "progress.json"
    tracker = ProgressTracker(epochs=3, mirror=mirror)
    tracker.update(epoch=1, loss=0.25)
    read = progress_from_file(mirror)()
    assert read is not None
    assert read.epoch == 1
    assert read.loss == 0.25
    assert progress_from_file(tmp_path / "missing.json")() is None


def _role(tmp_path: Path, address: str | None) -> RoleProcess:
    environ = {
        ENV_ROLE: Role.sampler.value,
        ENV_PARTITION_DIR: str(tmp_path / "partition"),
        ENV_RUN_DIR: str(tmp_path / "run"),
        ENV_JOB_NAME: "job",
        ENV_JOB_UID: "uid-1",
        ENV_METRICS_PORT: "0",
    }
    if address is not None:
        environ[ENV_METRICS_ADDRESS] = address
    return RoleProcess(Role.sampler, environ=environ)


@pytest.mark.parametrize(
    ("address", "bound"), [("127.0.0.1", "127.0.0.1"), (None, "0.0.0.0")], ids=["set", "unset"]
)
def test_a_role_binds_where_the_contract_says(
    tmp_path: Path, address: str | None, bound: str
) -> None:
    """Unset binds every interface (pods: Prometheus scrapes the pod IP)."""
    srv = _role(tmp_path, address).serve_status(registry=CollectorRegistry())
    try:
        assert srv._httpd.server_address[0] == bound
    finally:
        srv.stop()


def test_a_bad_bind_address_is_named(tmp_path: Path) -> None:
    proc = _role(tmp_path, "192.0.2.1")  # TEST-NET: not on this machine
    with pytest.raises(OSError, match=ENV_METRICS_ADDRESS):
        proc.serve_status(registry=CollectorRegistry())
