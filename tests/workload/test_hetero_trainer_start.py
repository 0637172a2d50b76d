"""Start-up refusals of a heterogeneous job's trainers and samplers: they exit 2 and say
what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_api.spec import parse_spec
from distgnn_workload.runtime.bootstrap import RoleProcess
from distgnn_workload.runtime.lifecycle import exit_code


def _start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samplers: int, role: c.Role = c.Role.trainer
) -> int:
    spec = parse_spec(
        {
            "dataset": {"syntheticMag": {"scale": 0.001, "numClasses": 4}},
            "samplers": {"replicas": samplers},
            "trainers": {"replicas": 2, "gpusPerPod": 0},
            "model": {"arch": "rsage", "fanout": [5, 5], "numLayers": 2},
        }
    )
    config = tmp_path / "job.json"
    config.write_text(c.job_config_json("job", "ns", "uid-1", spec))
    environ = {
        c.ENV_ROLE: role.value,
        c.ENV_RANK: "0",
        c.ENV_NUM_TRAINERS: "2",
        c.ENV_NUM_SAMPLERS: str(samplers),
        c.ENV_TRAINER_ADDRS: "127.0.0.1:1,127.0.0.1:3",
        c.ENV_SAMPLER_ADDRS: "127.0.0.1:2" if samplers else "",
        c.ENV_PARTITION_DIR: str(tmp_path / "no-partitions"),
        c.ENV_RUN_DIR: str(tmp_path / "run"),
        c.ENV_CONFIG: str(config),
        c.ENV_JOB_NAME: "job",
        c.ENV_JOB_UID: "uid-1",
        c.ENV_METRICS_PORT: "0",
        c.ENV_DEVICE: "cpu",
    }
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    if role is c.Role.sampler:
        from distgnn_workload.sampler.process import main as sampler_main

        return exit_code(lambda: sampler_main(RoleProcess(c.Role.sampler)), "sampler")
    from distgnn_workload.trainer.supervisor import main

    return exit_code(lambda: main(RoleProcess(c.Role.trainer)), "trainer")


@pytest.mark.parametrize("samplers", [0, 1], ids=["worker-mode", "server-client"])
def test_a_missing_typed_store_is_bad_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    samplers: int,
) -> None:
    assert _start(tmp_path, monkeypatch, samplers=samplers) == c.EXIT_BAD_INPUT
    out = capsys.readouterr()
    assert "no partition store" in out.out + out.err


def test_a_typed_sampler_without_its_store_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _start(tmp_path, monkeypatch, samplers=1, role=c.Role.sampler) == c.EXIT_BAD_INPUT
    out = capsys.readouterr()
    assert "no partition store" in out.out + out.err
