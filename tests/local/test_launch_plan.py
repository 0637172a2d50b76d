"""Pod templates rendered by the operator's builders, turned into local processes."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from distgnn_api.contract import (
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    ENV_CONFIG,
    ENV_DATA_DIR,
    ENV_DDP_PORT,
    ENV_DEVICE,
    ENV_METRICS_ADDRESS,
    ENV_METRICS_PORT,
    ENV_PARTITION_DIR,
    ENV_RUN_DIR,
    ENV_TERMINATION_LOG,
    Role,
    WorkloadEnv,
    load_job_config,
    partition_key,
    role_module,
)
from distgnn_api.spec import DistGNNJobSpec, parse_spec
from distgnn_operator.builders import (
    JobContext,
    build_config_map,
    build_partition_job,
    build_statefulset,
)
from distgnn_operator.local.launch_plan import LaunchPlanner, LocalLayout, ProcessSpec
from distgnn_operator.local.loopback import LocalModeError
from distgnn_operator.local.ports import ephemeral_range, free_ports

UID = "0f8e2a56-6c1e-4c39-9d55-3d2f0b7c1a11"


def _spec(**overrides: Any) -> DistGNNJobSpec:
    data: dict[str, Any] = {
        "dataset": {"synthetic": {"numNodes": 100, "numEdges": 400}},
        "samplers": {"replicas": 2},
        "trainers": {"replicas": 2, "gpusPerPod": 0},
    }
    data.update(overrides)
    return parse_spec(data)


def _plan(
    tmp_path: Path, spec: DistGNNJobSpec, gpus: tuple[str, ...] = ()
) -> tuple[LaunchPlanner, dict[Role, list[ProcessSpec]]]:
    ctx = JobContext(name="demo", namespace="local", uid=UID, spec=spec)
    layout = LocalLayout(
        job_name="demo",
        namespace="local",
        data_dir=tmp_path / "data",
        run_dir=tmp_path / "data" / "runs" / UID,
        gpus=gpus,
        cpus=4,
    )
    planner = LaunchPlanner(layout, [build_config_map(ctx)])
    roles = [Role.trainer] if spec.worker_mode else [Role.sampler, Role.trainer]
    manifests = {r: build_statefulset(ctx, r) for r in roles}
    for role, manifest in manifests.items():
        planner.register(manifest, role)
    plans = {r: planner.processes(m, r, threads=1) for r, m in manifests.items()}
    plans[Role.partitioner] = planner.processes(
        build_partition_job(ctx), Role.partitioner, threads=4
    )
    return planner, plans


def test_each_pod_becomes_a_process_that_satisfies_the_contract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISTGNN_STRAY", "from the host shell")
    spec = _spec()
    _, plans = _plan(tmp_path, spec)
    everyone = [p for procs in plans.values() for p in procs]
    assert [p.name for p in everyone] == [
        "sampler-0",
        "sampler-1",
        "trainer-0",
        "trainer-1",
        "partition-0",
    ]
    data = tmp_path / "data"
    for proc in everyone:
        env = WorkloadEnv.from_environ(proc.env)
        assert (env.role, env.rank) == (proc.role, proc.rank)
        assert proc.argv == (sys.executable, "-m", role_module(proc.role))
        assert "DISTGNN_STRAY" not in proc.env
        assert proc.env[ENV_DEVICE] == "cpu"
        assert proc.env["CUDA_VISIBLE_DEVICES"] == ""
        assert env.procs_per_pod == 1
        # Volume paths map to the local data directory.
        assert proc.env[ENV_DATA_DIR] == str(data)
        assert proc.env[ENV_PARTITION_DIR] == str(data / "partitions" / partition_key(spec))
        assert proc.env[ENV_RUN_DIR] == str(data / "runs" / UID)
        config = load_job_config(proc.env[ENV_CONFIG])
        assert (config.uid, config.spec) == (UID, spec)
        assert Path(proc.env[ENV_CONFIG]).is_relative_to(data / "runs" / UID)
        assert proc.log_path == data / "runs" / UID / "logs" / f"{proc.name}.log"

    # Every process sees the same peers, all on loopback, each on a port of its own.
    envs = [WorkloadEnv.from_environ(p.env) for p in everyone]
    assert len({(e.trainer_addrs, e.sampler_addrs, e.ddp_port) for e in envs}) == 1
    peers = envs[0].trainer_addrs + envs[0].sampler_addrs
    assert [a.host for a in peers] == ["127.0.0.1"] * 4
    metrics = [e.metrics_port for e in envs]
    ports = [a.port for a in peers] + [envs[0].ddp_port] + metrics
    assert len(set(ports)) == len(ports) == 4 + 1 + 5


def test_metrics_bind_loopback_and_the_partition_figures_stay_in_the_run(tmp_path: Path) -> None:
    _, plans = _plan(tmp_path, _spec())
    for proc in (p for procs in plans.values() for p in procs):
        assert proc.env[ENV_METRICS_ADDRESS] == "127.0.0.1", proc.name
    (partition,) = plans[Role.partitioner]
    assert Path(partition.env[ENV_TERMINATION_LOG]).parent == partition.log_path.parent
    assert ENV_TERMINATION_LOG not in plans[Role.trainer][0].env


def test_trainers_get_one_gpu_each_and_samplers_share(tmp_path: Path) -> None:
    spec = _spec(
        trainers={"replicas": 2, "gpusPerPod": 1}, samplers={"replicas": 3, "gpusPerPod": 1}
    )
    _, plans = _plan(tmp_path, spec, gpus=("3", "5"))
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plans[Role.trainer]] == ["3", "5"]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in plans[Role.sampler]] == ["3", "5", "3"]
    assert {p.env[ENV_DEVICE] for p in plans[Role.trainer]} == {"cuda"}
    assert [p.env[ENV_DEVICE] for p in plans[Role.partitioner]] == ["cpu"]


def test_a_gpu_job_runs_on_cpu_where_there_is_no_gpu(tmp_path: Path) -> None:
    spec = _spec(trainers={"replicas": 2, "gpusPerPod": 4})
    _, plans = _plan(tmp_path, spec)
    for proc in plans[Role.trainer] + plans[Role.sampler]:
        env = WorkloadEnv.from_environ(proc.env)
        assert (env.device, env.procs_per_pod) == ("cpu", 1)


def test_too_few_gpus_is_an_error_naming_the_field(tmp_path: Path) -> None:
    spec = _spec(trainers={"replicas": 2, "gpusPerPod": 2})
    with pytest.raises(LocalModeError, match=r"spec\.trainers: .*need 4 GPUs.*has 2"):
        _plan(tmp_path, spec, gpus=("0", "1"))


def test_gpus_per_pod_become_processes_per_pod_for_every_role(tmp_path: Path) -> None:
    spec = _spec(trainers={"replicas": 1, "gpusPerPod": 2})
    _, plans = _plan(tmp_path, spec, gpus=("0", "1"))
    assert plans[Role.trainer][0].env["CUDA_VISIBLE_DEVICES"] == "0,1"
    for proc in plans[Role.trainer] + plans[Role.sampler]:
        assert WorkloadEnv.from_environ(proc.env).procs_per_pod == 2


def test_worker_mode_has_no_sampler_peers(tmp_path: Path) -> None:
    _, plans = _plan(tmp_path, _spec(samplers={"replicas": 0}))
    assert Role.sampler not in plans
    for proc in plans[Role.trainer]:
        env = WorkloadEnv.from_environ(proc.env)
        assert env.worker_mode
        assert len(env.trainer_addrs) == 2


def test_unsupported_downward_api_field_is_named(tmp_path: Path) -> None:
    ctx = JobContext(name="demo", namespace="local", uid=UID, spec=_spec())
    sts = build_statefulset(ctx, Role.trainer)
    sts["spec"]["template"]["spec"]["containers"][0]["env"].append(
        {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}}
    )
    layout = LocalLayout("demo", "local", tmp_path, tmp_path / "run")
    planner = LaunchPlanner(layout, [build_config_map(ctx)])
    with pytest.raises(LocalModeError, match=r"container trainer env X: fieldRef 'status\.podIPs'"):
        planner.processes(sts, Role.trainer, threads=1)


def test_addresses_and_ports_rewritten_only_where_the_builder_set_them(tmp_path: Path) -> None:
    planner, plans = _plan(tmp_path, _spec())
    trainer0 = plans[Role.trainer][0]
    assert planner.network.port(Role.trainer, 0, 29400) == int(trainer0.env[ENV_DDP_PORT])
    metrics = int(trainer0.env[ENV_METRICS_PORT])
    assert planner.network.port(Role.trainer, 0, _spec().metrics_port) == metrics


def test_the_contract_is_written_by_its_writer_and_changed_through_it(tmp_path: Path) -> None:
    _, plans = _plan(tmp_path, _spec())
    trainer1 = plans[Role.trainer][1]
    env = WorkloadEnv.from_environ(trainer1.env)
    assert {k: trainer1.env[k] for k in env.to_environ()} == env.to_environ()
    assert env.shutdown_timeout_s == DEFAULT_SHUTDOWN_TIMEOUT_S
    quick = trainer1.with_contract(shutdown_timeout_s=2.0, extra={"DISTGNN_CUDA_GRAPH": "off"})
    changed = WorkloadEnv.from_environ(quick.env)
    assert changed == replace(env, shutdown_timeout_s=2.0)
    assert quick.env["DISTGNN_CUDA_GRAPH"] == "off"
    assert quick.env["PYTHONUNBUFFERED"] == "1"


def test_loopback_ports_avoid_the_kernels_ephemeral_range(tmp_path: Path) -> None:
    low, high = ephemeral_range()
    _, plans = _plan(tmp_path, _spec())
    envs = [WorkloadEnv.from_environ(p.env) for procs in plans.values() for p in procs]
    ports = {a.port for a in envs[0].trainer_addrs + envs[0].sampler_addrs}
    ports |= {envs[0].ddp_port} | {e.metrics_port for e in envs}
    assert ports
    assert not [p for p in ports if low <= p <= high]
    assert len(set(free_ports(50))) == 50
