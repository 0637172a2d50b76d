"""Rendezvous: every process of a job meets at one TCPStore that trainer 0 hosts.

The store listens on trainer 0's host (from ``ENV_TRAINER_ADDRS``) at ``ENV_DDP_PORT``. The
other processes resolve that DNS name with retry and exponential backoff (a pod's DNS record
may appear after the pod starts), connect, announce themselves, and wait until every member
of the job has announced itself. A member that never comes is named in the timeout error
with its role, rank and address. The RPC agent and the DDP process group are then built on
the same store (``distgnn_workload.runtime.rpc`` and ``.ddp``).

Every member records a generation token read from the store. When trainer 0 goes away (a
gang restart), the store goes with it; the watchdog of
:mod:`distgnn_workload.runtime.store_watchdog` notices this in the other processes so that
they exit instead of waiting forever on peers that are gone.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import torch
from torch._C._distributed_c10d import TCPStore

from distgnn_api.contract import (
    ENV_DDP_PORT,
    ENV_RENDEZVOUS_TIMEOUT,
    ENV_SAMPLER_ADDRS,
    ENV_TRAINER_ADDRS,
    Address,
    ContractError,
    Role,
    WorkloadEnv,
)

log = logging.getLogger(__name__)

GENERATION_KEY = "distgnn/generation"
ARRIVAL_PREFIX = "distgnn/arrived/"

Resolver = Callable[[str, int], str]


class RendezvousError(RuntimeError):
    """Peers did not meet in time; the message names who was missing and where."""


@dataclass(frozen=True)
class Member:
    """One process of the job: a sampler pod, or one training process of a trainer pod."""

    role: Role
    pod_rank: int
    local_rank: int
    address: Address
    procs_per_pod: int = 1

    @property
    def rank(self) -> int:
        """Global rank within the role: pod rank x processes per pod + local rank."""
        return self.pod_rank * self.procs_per_pod + self.local_rank

    @property
    def name(self) -> str:
        """The RPC worker name, e.g. ``trainer-3`` or ``sampler-0``."""
        return f"{self.role.value}-{self.rank}"

    def describe(self) -> str:
        where = (
            f"pod {self.pod_rank}, local rank {self.local_rank}, " if self.procs_per_pod > 1 else ""
        )
        return f"{self.role.value} {self.rank} ({where}{self.address})"


def job_members(env: WorkloadEnv) -> list[Member]:
    """Every process of the job, trainers first (global rank order), then samplers.

    The position in this list is the process's RPC rank.
    """
    if len(env.trainer_addrs) != env.num_trainers:
        raise ContractError(
            f"{ENV_TRAINER_ADDRS} lists {len(env.trainer_addrs)} addresses but the job has "
            f"{env.num_trainers} trainer pods; list one host:port per trainer pod"
        )
    if len(env.sampler_addrs) != env.num_samplers:
        raise ContractError(
            f"{ENV_SAMPLER_ADDRS} lists {len(env.sampler_addrs)} addresses but the job has "
            f"{env.num_samplers} sampler pods; list one host:port per sampler pod"
        )
    out = [
        Member(Role.trainer, pod, local, addr, env.procs_per_pod)
        for pod, addr in enumerate(env.trainer_addrs)
        for local in range(env.procs_per_pod)
    ]
    out += [Member(Role.sampler, pod, 0, addr) for pod, addr in enumerate(env.sampler_addrs)]
    return out


def _getaddrinfo(host: str, port: int) -> str:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return str(infos[0][4][0])


def resolve(
    host: str,
    port: int,
    *,
    timeout_s: float,
    what: str,
    resolver: Resolver = _getaddrinfo,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    initial_backoff_s: float = 0.1,
    max_backoff_s: float = 5.0,
) -> str:
    """Resolve a peer's DNS name, retrying with exponential backoff until ``timeout_s``."""
    deadline = clock() + timeout_s
    backoff = initial_backoff_s
    attempts = 0
    while True:
        attempts += 1
        try:
            return resolver(host, port)
        except (OSError, UnicodeError) as err:
            remaining = deadline - clock()
            if remaining <= 0:
                raise RendezvousError(
                    f"{what} never came: its DNS name {host!r} (port {port}) did not resolve "
                    f"within {timeout_s:.0f}s after {attempts} attempts (last error: {err}). "
                    "Check that the pod exists and that the job's headless Service publishes "
                    f"not-ready addresses; raise {ENV_RENDEZVOUS_TIMEOUT} if pods start slowly."
                ) from None
            if attempts == 1 or attempts % 10 == 0:
                log.info("waiting for DNS of %s (%s): %s", what, host, err)
            sleep(min(backoff * (0.5 + random.random()), remaining))
            backoff = min(backoff * 2, max_backoff_s)


@dataclass
class Group:
    """The outcome of a rendezvous: the store, the members and what each announced."""

    store: TCPStore
    generation: str
    members: list[Member]
    me: Member
    info: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per member name: what it announced (``device``, ``host``, ``pid``)."""
    store_host: str = ""
    store_port: int = 0

    @property
    def rpc_rank(self) -> int:
        return self.members.index(self.me)

    @property
    def world_size(self) -> int:
        return len(self.members)

    @property
    def trainers(self) -> list[Member]:
        return [m for m in self.members if m.role is Role.trainer]

    @property
    def samplers(self) -> list[Member]:
        return [m for m in self.members if m.role is Role.sampler]

    def device_of(self, name: str) -> str:
        return self.info.get(name, {}).get("device", "cpu")

    def placement_of(self, name: str) -> Placement:
        """Where a member runs: its node (the Kubernetes node, or the host) and its GPU."""
        info = self.info.get(name, {})
        return Placement(node=info.get("node", ""), gpu=info.get("gpu", ""))


@dataclass(frozen=True)
class Placement:
    """A process's node and physical GPU (its UUID; empty without one)."""

    node: str
    gpu: str


def gpu_uuid(device: str) -> str:
    """The physical identity of ``device`` (``cuda:N``), stable across processes and pods."""
    if not device.startswith("cuda"):
        return ""
    index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return str(getattr(props, "uuid", "") or f"{socket.gethostname()}/cuda:{index}")


def store_owner(env: WorkloadEnv) -> Member:
    """Trainer 0, which hosts the job's store on the DDP port."""
    if not env.trainer_addrs:
        raise ContractError(
            f"{ENV_TRAINER_ADDRS} is empty; every process needs trainer 0's address, which "
            "hosts the job's rendezvous store"
        )
    return Member(Role.trainer, 0, 0, Address(env.trainer_addrs[0].host, env.ddp_port))


def _connect(
    host: str, port: int, *, is_master: bool, timeout_s: float, what: str, resolver: Resolver
) -> TCPStore:
    deadline = time.monotonic() + timeout_s
    if is_master:
        # The master listens on every interface; a port still held by a dying predecessor is
        # retried until the deadline.
        while True:
            try:
                return TCPStore(
                    "127.0.0.1",
                    port,
                    None,
                    True,
                    timeout=timedelta(seconds=max(timeout_s, 1.0)),
                    wait_for_workers=False,
                )
            except RuntimeError as err:
                if time.monotonic() >= deadline:
                    raise RendezvousError(
                        f"could not listen on {ENV_DDP_PORT}={port} for the job's store: {err}"
                    ) from None
                log.info("store port %d busy (%s); retrying", port, err)
                time.sleep(1.0)
    ip = resolve(host, port, timeout_s=timeout_s, what=what, resolver=resolver)
    last: Exception | None = None
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            return TCPStore(
                ip,
                port,
                None,
                False,
                timeout=timedelta(seconds=max(1.0, min(remaining, 10.0))),
            )
        except RuntimeError as err:
            last = err
            log.info("waiting for %s at %s:%d (%s)", what, host, port, ip)
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    raise RendezvousError(
        f"{what} never came: nothing answered at {host}:{port} (resolved to {ip}) within "
        f"{timeout_s:.0f}s (last error: {last}). It hosts the job's rendezvous store on "
        f"{ENV_DDP_PORT}; check that it started, and raise {ENV_RENDEZVOUS_TIMEOUT} if pods "
        "start slowly."
    )


def rendezvous(
    env: WorkloadEnv,
    *,
    local_rank: int = 0,
    device: str = "cpu",
    timeout_s: float | None = None,
    resolver: Resolver = _getaddrinfo,
    poll_s: float = 0.05,
) -> Group:
    """Meet every other process of the job; raise RendezvousError naming any that never came."""
    timeout = env.rendezvous_timeout_s if timeout_s is None else timeout_s
    members = job_members(env)
    me = next(
        m
        for m in members
        if m.role is env.role and m.pod_rank == env.rank and m.local_rank == local_rank
    )
    owner = store_owner(env)
    is_master = me.role is Role.trainer and me.rank == 0
    deadline = time.monotonic() + timeout
    payload = json.dumps(
        {
            "device": device,
            "host": socket.gethostname(),
            "node": env.node_name or socket.gethostname(),
            "gpu": gpu_uuid(device),
            "pid": str(os.getpid()),
        }
    )
    what = f"trainer 0 ({owner.address})"
    while True:
        remaining = deadline - time.monotonic()
        store = _connect(
            owner.address.host,
            owner.address.port,
            is_master=is_master,
            timeout_s=max(remaining, 0.1),
            what=what,
            resolver=resolver,
        )
        try:
            if is_master:
                generation = uuid.uuid4().hex
                store.set(GENERATION_KEY, generation)
            else:
                generation = store.get(GENERATION_KEY).decode()
            store.set(ARRIVAL_PREFIX + me.name, payload)
            _wait_for(store, members, deadline, timeout, poll_s)
            info = {
                m.name: json.loads(store.get(ARRIVAL_PREFIX + m.name).decode()) for m in members
            }
        except RendezvousError:
            raise
        except RuntimeError as err:
            # The store went away under us (its owner restarted): start over until the deadline.
            if is_master or time.monotonic() >= deadline:
                raise RendezvousError(
                    f"the rendezvous store at {owner.address} failed: {err}"
                ) from None
            log.warning("lost the rendezvous store at %s (%s); reconnecting", owner.address, err)
            time.sleep(0.5)
            continue
        store.set_timeout(timedelta(seconds=max(timeout, 60.0)))
        log.info(
            "rendezvous complete: %s is rpc rank %d of %d (generation %s)",
            me.name,
            members.index(me),
            len(members),
            generation[:8],
        )
        return Group(
            store=store,
            generation=generation,
            members=members,
            me=me,
            info=info,
            store_host=owner.address.host,
            store_port=owner.address.port,
        )


def _wait_for(
    store: TCPStore, members: list[Member], deadline: float, timeout: float, poll_s: float
) -> None:
    keys = [ARRIVAL_PREFIX + m.name for m in members]
    last_log = time.monotonic()
    while not store.check(keys):
        now = time.monotonic()
        if now >= deadline or now - last_log > 15.0:
            missing = [m for m, k in zip(members, keys, strict=True) if not store.check([k])]
            if not missing:
                continue
            names = ", ".join(m.describe() for m in missing)
            if now >= deadline:
                raise RendezvousError(
                    f"rendezvous timed out after {timeout:.0f}s: never came: {names}. Check "
                    "that these pods are running and can reach trainer 0; raise "
                    f"{ENV_RENDEZVOUS_TIMEOUT} if pods start slowly."
                )
            log.info("waiting for peers: %s", names)
            last_log = now
        time.sleep(poll_s)
