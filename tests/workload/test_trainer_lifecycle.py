"""Completion and exit codes of the trainer and sampler entry points (in process, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_api.spec import EvaluationKind, parse_spec
from distgnn_workload.partition.meta import StoreError
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.lifecycle import (
    BadInputError,
    exit_code,
    exit_code_of,
    finished_result,
    load_config,
    write_result,
)

SPEC = parse_spec({"dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}}})


def _environ(tmp_path: Path, role: c.Role, uid: str = "uid-1") -> dict[str, str]:
    config = tmp_path / "job.json"
    if not config.exists():
        config.write_text(c.job_config_json("job", "ns", uid, SPEC))
    return {
        c.ENV_ROLE: role.value,
        c.ENV_RANK: "0",
        c.ENV_NUM_TRAINERS: "1",
        c.ENV_NUM_SAMPLERS: "1",
        c.ENV_TRAINER_ADDRS: "127.0.0.1:1",
        c.ENV_SAMPLER_ADDRS: "127.0.0.1:2",
        c.ENV_PARTITION_DIR: str(tmp_path / "no-partitions"),
        c.ENV_RUN_DIR: str(tmp_path / "run"),
        c.ENV_CONFIG: str(config),
        c.ENV_JOB_NAME: "job",
        c.ENV_JOB_UID: uid,
        c.ENV_METRICS_PORT: "0",
        c.ENV_DEVICE: "cpu",
    }


def _result(uid: str) -> c.Result:
    return c.Result(
        job_uid=uid,
        epochs=3,
        test_accuracy=0.9,
        test_accuracy_kind=EvaluationKind.full,
        seeds_per_second=10.0,
        elapsed_seconds=1.0,
        finished_at=c.rfc3339_now(),
    )


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BadInputError("x"), c.EXIT_BAD_INPUT),
        (c.ContractError("x"), c.EXIT_BAD_INPUT),
        (StoreError("x"), c.EXIT_BAD_INPUT),
        (RuntimeError("x"), c.EXIT_INTERNAL_ERROR),
        (OSError("x"), c.EXIT_INTERNAL_ERROR),
    ],
)
def test_errors_map_to_contract_exit_codes(error: BaseException, code: int) -> None:
    assert exit_code_of(error) == code


def test_exit_code_prints_one_line_for_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    def main() -> int:
        raise BadInputError("the job config /x is invalid: spec.model: nope")

    assert exit_code(main, "trainer") == c.EXIT_BAD_INPUT
    assert "distgnn trainer: bad input: the job config /x is invalid" in capsys.readouterr().err


def test_finished_result_is_per_job_uid(tmp_path: Path) -> None:
    assert finished_result(tmp_path, "a") is None
    write_result(tmp_path, _result("a"))
    got = finished_result(tmp_path, "a")
    assert got is not None
    assert got.epochs == 3
    with pytest.raises(BadInputError, match="belongs to job UID a"):
        finished_result(tmp_path, "b")


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    env = c.WorkloadEnv.from_environ(_environ(tmp_path, c.Role.trainer))
    assert load_config(env).uid == "uid-1"
    (tmp_path / "job.json").write_text('{"name": "job"}')
    with pytest.raises(BadInputError, match=r"job\.json is invalid"):
        load_config(env)
    (tmp_path / "job.json").unlink()
    with pytest.raises(BadInputError, match=c.ENV_CONFIG):
        load_config(env)


def test_config_of_another_job_is_bad_input(tmp_path: Path) -> None:
    env = c.WorkloadEnv.from_environ(_environ(tmp_path, c.Role.trainer, uid="uid-1"))
    (tmp_path / "job.json").write_text(c.job_config_json("job", "ns", "uid-2", SPEC))
    with pytest.raises(BadInputError, match="uid-2"):
        load_config(env)


@pytest.mark.parametrize("role", [c.Role.trainer, c.Role.sampler])
def test_a_restarted_process_exits_0_when_the_result_exists(
    tmp_path: Path, role: c.Role, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = _environ(tmp_path, role)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    write_result(tmp_path / "run", _result("uid-1"))
    if role is c.Role.trainer:
        from distgnn_workload.trainer.supervisor import main
    else:
        from distgnn_workload.sampler.process import main
    # The partition dir does not exist: exiting 0 must not need it, nor any peer.
    assert exit_code(lambda: main(RoleProcess(role)), role.value) == c.EXIT_OK


def test_a_missing_partition_store_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _environ(tmp_path, c.Role.sampler).items():
        monkeypatch.setenv(key, value)
    from distgnn_workload.sampler.process import main

    assert exit_code(lambda: main(RoleProcess(c.Role.sampler)), "sampler") == c.EXIT_BAD_INPUT
