"""Rendezvous: DNS retry with backoff, and timeout errors that name the missing peer."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from distgnn_api import contract as c
from distgnn_operator.local.ports import free_ports
from distgnn_workload.runtime.rendezvous import (
    Member,
    RendezvousError,
    job_members,
    rendezvous,
    resolve,
)


def _env(
    role: c.Role,
    rank: int,
    *,
    trainers: int = 2,
    samplers: int = 1,
    ppp: int = 1,
    ddp_port: int = 29400,
    host: str = "127.0.0.1",
) -> c.WorkloadEnv:
    return c.WorkloadEnv.from_environ(
        {
            c.ENV_ROLE: role.value,
            c.ENV_RANK: str(rank),
            c.ENV_NUM_TRAINERS: str(trainers),
            c.ENV_NUM_SAMPLERS: str(samplers),
            c.ENV_PROCS_PER_POD: str(ppp),
            c.ENV_TRAINER_ADDRS: ",".join(f"{host}:{7000 + r}" for r in range(trainers)),
            c.ENV_SAMPLER_ADDRS: ",".join(f"{host}:{8000 + r}" for r in range(samplers)),
            c.ENV_DDP_PORT: str(ddp_port),
            c.ENV_PARTITION_DIR: "/nonexistent/p",
            c.ENV_RUN_DIR: "/nonexistent/r",
            c.ENV_JOB_NAME: "job",
            c.ENV_JOB_UID: "uid",
        }
    )


def test_members_are_trainers_by_global_rank_then_samplers() -> None:
    members = job_members(_env(c.Role.trainer, 0, trainers=2, samplers=2, ppp=2))
    assert [m.name for m in members] == [
        "trainer-0",
        "trainer-1",
        "trainer-2",
        "trainer-3",
        "sampler-0",
        "sampler-1",
    ]
    assert members[3].pod_rank == 1
    assert members[3].local_rank == 1
    assert str(members[3].address) == "127.0.0.1:7001"


def test_addresses_must_match_the_world_size() -> None:
    env = _env(c.Role.trainer, 0, trainers=2)
    broken = c.WorkloadEnv(**{**env.__dict__, "num_trainers": 3})
    with pytest.raises(c.ContractError, match=c.ENV_TRAINER_ADDRS):
        job_members(broken)


def test_resolve_retries_with_growing_backoff() -> None:
    calls: list[str] = []
    sleeps: list[float] = []

    def flaky(host: str, port: int) -> str:
        calls.append(host)
        if len(calls) < 4:
            raise socket.gaierror(-2, "Name or service not known")
        return "10.0.0.7"

    ip = resolve(
        "job-trainer-0.job-peers.ns.svc",
        29400,
        timeout_s=60,
        what="trainer 0",
        resolver=flaky,
        sleep=sleeps.append,
    )
    assert ip == "10.0.0.7"
    assert len(calls) == 4
    assert len(sleeps) == 3
    # jittered exponential backoff: each nominal delay doubles (jitter is 0.5x..1.5x)
    assert sleeps[2] > sleeps[0]


def test_resolve_timeout_names_the_peer_and_host() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        now[0] += s

    def never(host: str, port: int) -> str:
        raise socket.gaierror(-2, "Name or service not known")

    with pytest.raises(RendezvousError) as err:
        resolve(
            "job-sampler-1.job-peers.ns.svc",
            29500,
            timeout_s=5,
            what="sampler 1",
            resolver=never,
            sleep=sleep,
            clock=clock,
        )
    message = str(err.value)
    assert "sampler 1" in message
    assert "job-sampler-1.job-peers.ns.svc" in message
    assert c.ENV_RENDEZVOUS_TIMEOUT in message


def test_rendezvous_timeout_names_the_members_that_never_came() -> None:
    (port,) = free_ports(1)
    with pytest.raises(RendezvousError) as err:
        rendezvous(_env(c.Role.trainer, 0, trainers=2, samplers=1, ddp_port=port), timeout_s=1.0)
    message = str(err.value)
    assert "trainer 1 (127.0.0.1:7001)" in message
    assert "sampler 0 (127.0.0.1:8000)" in message
    assert "trainer 0 (" not in message


def test_a_peer_without_trainer_0_names_trainer_0() -> None:
    (port,) = free_ports(1)
    with pytest.raises(RendezvousError) as err:
        rendezvous(_env(c.Role.sampler, 0, trainers=1, ddp_port=port), timeout_s=1.0)
    assert f"trainer 0 (127.0.0.1:{port})" in str(err.value)


def test_every_member_meets_and_learns_the_others_devices() -> None:
    (port,) = free_ports(1)
    envs = [
        _env(c.Role.trainer, 0, trainers=2, samplers=1, ddp_port=port),
        _env(c.Role.trainer, 1, trainers=2, samplers=1, ddp_port=port),
        _env(c.Role.sampler, 0, trainers=2, samplers=1, ddp_port=port),
    ]
    groups: dict[int, object] = {}
    errors: list[BaseException] = []

    def join(i: int) -> None:
        try:
            groups[i] = rendezvous(envs[i], device=f"cpu{i}", timeout_s=20.0)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=join, args=(i,)) for i in (1, 2, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    gens = {g.generation for g in groups.values()}  # type: ignore[attr-defined]
    assert len(gens) == 1
    sampler = groups[2]
    assert sampler.me == Member(c.Role.sampler, 0, 0, c.Address("127.0.0.1", 8000))  # type: ignore[attr-defined]
    assert sampler.rpc_rank == 2  # type: ignore[attr-defined]
    assert sampler.device_of("trainer-1") == "cpu1"  # type: ignore[attr-defined]


def test_store_port_in_env_is_the_ddp_port(tmp_path: Path) -> None:
    env = _env(c.Role.trainer, 1, ddp_port=31234)
    from distgnn_workload.runtime.rendezvous import store_owner

    owner = store_owner(env)
    assert str(owner.address) == "127.0.0.1:31234"
    assert owner.describe() == "trainer 0 (127.0.0.1:31234)"
