"""The operator-workload contract: env round trip, names, partition keys and ownership."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_api.spec import EvaluationKind, Progress, parse_spec


def _env(**extra: str) -> dict[str, str]:
    env = {
        c.ENV_ROLE: "trainer",
        c.ENV_RANK: "1",
        c.ENV_NUM_TRAINERS: "2",
        c.ENV_NUM_SAMPLERS: "2",
        c.ENV_TRAINER_ADDRS: "t-0.svc:29500,t-1.svc:29500",
        c.ENV_SAMPLER_ADDRS: "s-0.svc:29500,s-1.svc:29500",
        c.ENV_PARTITION_DIR: "/var/lib/distgnn/partitions/abc",
        c.ENV_RUN_DIR: "/var/lib/distgnn/runs/uid",
        c.ENV_JOB_NAME: "job",
        c.ENV_JOB_UID: "uid",
    }
    env.update(extra)
    return env


def test_env_round_trip() -> None:
    env = c.WorkloadEnv.from_environ(_env())
    assert env.role is c.Role.trainer
    assert env.rank == 1
    assert [str(a) for a in env.trainer_addrs] == ["t-0.svc:29500", "t-1.svc:29500"]
    assert env.ddp_port == c.DDP_PORT
    assert env.config_path == Path(c.CONFIG_MOUNT_DIR) / c.CONFIG_FILE_NAME
    assert not env.worker_mode


@pytest.mark.parametrize(("device", "node"), [(None, None), ("cuda:1", "node-a")])
def test_env_writer_round_trips_through_the_reader(device: str | None, node: str | None) -> None:
    env = c.WorkloadEnv(
        role=c.Role.sampler,
        rank=3,
        num_trainers=4,
        num_samplers=0,
        procs_per_pod=2,
        trainer_addrs=(c.Address("t-0.svc", 29500), c.Address("127.0.0.1", 4001)),
        sampler_addrs=(),
        ddp_port=4100,
        metrics_port=9401,
        data_dir=Path("/data"),
        partition_dir=Path("/data/partitions/k"),
        run_dir=Path("/data/runs/u"),
        config_path=Path("/etc/distgnn/job.json"),
        job_name="job",
        job_uid="u",
        namespace="ns",
        device=device,
        rendezvous_timeout_s=12.5,
        shutdown_timeout_s=3.0,
        node_name=node,
        metrics_address="127.0.0.1" if device else None,
        termination_log=Path("/dev/termination-log") if device else None,
    )
    written = env.to_environ()
    assert all(isinstance(v, str) for v in written.values())
    assert c.WorkloadEnv.from_environ(written) == env
    # Every variable the reader knows is written (the optional ones only when set); the
    # settings are read when needed (WorkloadEnv.setting) and written through ``extra``.
    contract_vars = {v for k, v in vars(c).items() if k.startswith("ENV_")} - set(c.SETTINGS)
    optional = {c.ENV_DEVICE, c.ENV_NODE_NAME, c.ENV_METRICS_ADDRESS, c.ENV_TERMINATION_LOG}
    assert contract_vars - set(written) == (set() if device else optional)


def test_settings_are_read_by_name_and_only_the_contract_s() -> None:
    environ = {c.ENV_CUDA_GRAPH: " static ", c.ENV_PROFILE_DIR: ""}
    assert c.WorkloadEnv.setting(c.ENV_CUDA_GRAPH, environ) == "static"
    assert c.WorkloadEnv.setting(c.ENV_PROFILE_DIR, environ) is None  # empty is unset
    assert c.WorkloadEnv.setting(c.ENV_LOG_LEVEL, environ) is None
    with pytest.raises(c.ContractError, match="DISTGNN_TYPO is not a setting"):
        c.WorkloadEnv.setting("DISTGNN_TYPO", environ)
    # every setting is a DISTGNN_* name of its own, none a contract variable
    assert len(set(c.SETTINGS)) == len(c.SETTINGS)
    assert all(v.startswith("DISTGNN_") for v in c.SETTINGS)
    written = c.WorkloadEnv.from_environ(_env()).to_environ()
    assert not set(c.SETTINGS) & set(written)


def test_env_writer_adds_extra_variables_but_never_over_the_contract() -> None:
    env = c.WorkloadEnv.from_environ(_env())
    written = replace(env, extra={"DISTGNN_CUDA_GRAPH": "static"}).to_environ()
    assert written["DISTGNN_CUDA_GRAPH"] == "static"
    with pytest.raises(c.ContractError, match=c.ENV_RANK):
        replace(env, extra={c.ENV_RANK: "7"}).to_environ()


@pytest.mark.parametrize(
    ("var", "value", "phrase"),
    [
        (c.ENV_ROLE, "driver", "not one of partition, sampler, trainer"),
        (c.ENV_RANK, "one", "not an integer"),
        (c.ENV_NUM_TRAINERS, "0", "must be at least 1"),
        (c.ENV_TRAINER_ADDRS, "t-0.svc", "not host:port"),
        (c.ENV_JOB_UID, "", "is not set"),
    ],
)
def test_env_errors_name_the_variable(var: str, value: str, phrase: str) -> None:
    with pytest.raises(c.ContractError) as info:
        c.WorkloadEnv.from_environ(_env(**{var: value}))
    assert var in str(info.value)
    assert phrase in str(info.value)


def test_dns_names_follow_the_statefulset_rule() -> None:
    assert c.pod_dns_name("job", c.Role.sampler, 3, "ns") == "job-sampler-3.job-peers.ns.svc"
    addrs = c.peer_addrs("job", c.Role.trainer, 2, "ns", 29500)
    assert addrs == "job-trainer-0.job-peers.ns.svc:29500,job-trainer-1.job-peers.ns.svc:29500"


def test_partition_key_depends_on_data_and_partitioning_only() -> None:
    base = parse_spec({"dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}}})
    same = parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}},
            "training": {"epochs": 99},
            "partition": {"resources": {"requests": {"cpu": "4"}}},
        }
    )
    other_data = parse_spec({"dataset": {"synthetic": {"numNodes": 101, "numEdges": 300}}})
    other_algo = parse_spec(
        {
            "dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}},
            "partition": {"algorithm": "random"},
        }
    )
    assert c.partition_key(base) == c.partition_key(same)
    assert len({c.partition_key(s) for s in (base, other_data, other_algo)}) == 3


def test_partition_ownership_is_a_bijection() -> None:
    for holders, parts in [(1, 1), (2, 2), (2, 6), (4, 8)]:
        owned = [p for h in range(holders) for p in c.partitions_of_holder(h, parts, holders)]
        assert sorted(owned) == list(range(parts))
        for h in range(holders):
            for p in c.partitions_of_holder(h, parts, holders):
                assert c.holder_of_partition(p, parts, holders) == h


def test_progress_lines_round_trip() -> None:
    buf = io.StringIO()
    c.emit_progress("epoch", 3, 10, stream=buf, loss=0.5, seeds_per_second=1e5)
    line = buf.getvalue().strip()
    event = c.parse_progress_line(line)
    assert event is not None
    assert (event.stage, event.done, event.total) == ("epoch", 3, 10)
    assert event.metrics["loss"] == 0.5
    assert c.parse_progress_line("ordinary log line") is None


def test_job_config_round_trip(tmp_path: Path) -> None:
    spec = parse_spec({"dataset": {"synthetic": {"numNodes": 100, "numEdges": 300}}})
    path = tmp_path / c.CONFIG_FILE_NAME
    path.write_text(c.job_config_json("job", "ns", "uid-1", spec))
    cfg = c.load_job_config(path)
    assert cfg.spec == spec
    assert cfg.partition_key == c.partition_key(spec)


def test_dump_json_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    c.dump_json(target, {"a": 1})
    assert target.read_text().strip().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_result_names_the_kind_of_each_accuracy() -> None:
    fields = {
        "jobUid": "u",
        "epochs": 1,
        "testAccuracy": 0.9,
        "seedsPerSecond": 1.0,
        "elapsedSeconds": 1.0,
        "finishedAt": "2026-01-01T00:00:00Z",
    }
    # a result written before the kinds were recorded reads as sampled, not as bad input
    assert c.Result.model_validate(fields).test_accuracy_kind == EvaluationKind.sampled
    with pytest.raises(ValueError, match="testAccuracyKind"):
        c.Result.model_validate({**fields, "testAccuracyKind": "exact"})
    result = c.Result.model_validate(
        {**fields, "testAccuracyKind": "full", "valAccuracy": 0.8, "valAccuracyKind": "sampled"}
    )
    dumped = json.loads(result.model_dump_json(by_alias=True))
    assert (dumped["testAccuracyKind"], dumped["valAccuracyKind"]) == ("full", "sampled")
    progress = Progress(test_accuracy=0.9, test_accuracy_kind=EvaluationKind.full)
    assert json.loads(progress.model_dump_json(by_alias=True))["testAccuracyKind"] == "full"
